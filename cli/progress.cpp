#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace ftplan::cli {

StatusLine::StatusLine() : tty_(::isatty(STDERR_FILENO) == 1) {}

StatusLine::~StatusLine() { end(); }

void StatusLine::show(std::string_view text) {
  if (tty_) {
    fmt::print(stderr, "\r\033[K{}", text);  // to the line's start, clear it, write
    open_ = true;
  } else {
    fmt::print(stderr, "{}\n", text);
  }
  std::fflush(stderr);
}

void StatusLine::print(std::string_view text) {
  end();
  fmt::print(stderr, "{}\n", text);
}

void StatusLine::end() {
  if (open_) fmt::print(stderr, "\n");
  open_ = false;
}

std::string clock_text(double s) {
  if (!(s >= 0) || s > 360000) return "--:--";
  const auto t = static_cast<long>(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
                   : fmt::format("{}:{:02}", t / 60, t % 60);
}

ProgressBar::ProgressBar(std::string what, std::string unit, std::int64_t total, std::int64_t already, bool enabled)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      already_(already),
      enabled_(enabled),
      start_(Clock::now()),
      last_(start_) {}

void ProgressBar::update(std::int64_t done_now, std::string_view detail) {
  if (!enabled_) return;
  const auto now = Clock::now();
  constexpr double kTerminal_s = 0.1, kLines_s = 5;  // a log gets a line every few seconds
  const double since = std::chrono::duration<double>(now - last_).count();
  if (since < (line_.tty() ? kTerminal_s : kLines_s) && done_now + already_ < total_) return;
  last_ = now;
  draw(done_now, detail, now);
}

void ProgressBar::update(std::int64_t done_now, std::int64_t total, std::string_view detail) {
  total_ = total;
  update(done_now, detail);
}

void ProgressBar::finish(std::int64_t done_now, std::string_view detail) {
  if (!enabled_ || !line_.tty()) return;
  if (drawn_ || done_now > 0) draw(done_now, detail, Clock::now());
  line_.end();
}

double ProgressBar::elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void ProgressBar::draw(std::int64_t done_now, std::string_view detail, Clock::time_point now) {
  const double t = std::chrono::duration<double>(now - start_).count();
  const double rate = t > 0 ? static_cast<double>(done_now) / t : 0;
  const std::int64_t done = done_now + already_;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : -1;
  const double share = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1;
  if (line_.tty()) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(share * kWidth);
    line_.show(fmt::format(
        "{}: {:>{}}/{} {} [{}{}] {:3.0f}%{}  {:.1f}/s  ETA {}", what_, done, fmt::formatted_size("{}", total_), total_,
        unit_, std::string(static_cast<std::size_t>(filled), '#'),
        std::string(static_cast<std::size_t>(kWidth - filled), '.'), 100 * share, detail, rate, clock_text(eta)));
  } else {
    line_.show(fmt::format("{}: {}/{} {} ({:.0f}%){}, {:.1f} {}/s, ETA {}", what_, done, total_, unit_, 100 * share,
                           detail, rate, unit_, clock_text(eta)));
  }
  drawn_ = true;
}

}  // namespace ftplan::cli
