// Progress on stderr, the one way every verb shows it (calibrate's steps, plan's layouts, sweep's
// points): a line redrawn in place on a terminal; elsewhere (a log, a pipe) plain lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace ftplan::cli {

// The line itself: on a terminal each show() replaces the last; elsewhere each is a line of its own.
class StatusLine {
 public:
  StatusLine();
  ~StatusLine();  // ends a line left open
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;
  void show(std::string_view text);
  // A line of its own below the status (a note), which the next show() does not overwrite.
  void print(std::string_view text);
  void end();  // ends the open line, if any
  bool tty() const { return tty_; }

 private:
  bool tty_;
  bool open_ = false;
};

// `done` of `total` items with rate and ETA: "sweep: 1200/5000 points (24%), 96.1 points/s, ETA 0:39"
// (docs/sweep-format.md), a bar on a terminal. Redrawn at most every 0.1 s on a terminal, every 5 s
// elsewhere, and once more when the last item is done.
class ProgressBar {
 public:
  // `what` names the verb ("sweep"), `unit` the items ("points"); `already` were done before this
  // run started (a resumed sweep) and count toward the share but not the rate. Disabled: silent.
  ProgressBar(std::string what, std::string unit, std::int64_t total, std::int64_t already, bool enabled);
  // `done_now` items done by this run; `detail` follows the share (", 12 simulated").
  void update(std::int64_t done_now, std::string_view detail = {});
  void update(std::int64_t done_now, std::int64_t total, std::string_view detail);  // a total that grows
  // On a terminal: the final state, and the line ended.
  void finish(std::int64_t done_now, std::string_view detail = {});
  double elapsed_s() const;

 private:
  using Clock = std::chrono::steady_clock;
  void draw(std::int64_t done_now, std::string_view detail, Clock::time_point now);
  std::string what_, unit_;
  std::int64_t total_, already_;
  bool enabled_;
  bool drawn_ = false;
  StatusLine line_;
  Clock::time_point start_, last_;
};

// Seconds as a clock: "0:39", "1:02:03"; "--:--" when unknown (< 0) or beyond 100 hours.
std::string clock_text(double seconds);

}  // namespace ftplan::cli
