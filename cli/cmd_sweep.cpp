// `ftplan sweep` and `ftplan sweep-merge` (docs/sweep-format.md): many what-ifs on all cores,
// resumable, shardable across machines. This file handles files, progress and argv; the
// expansion, evaluation and table formats are core/sweep.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "app.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "io/output_file.hpp"
#include "progress.hpp"
#include "sweep/output.hpp"
#include "sweep/sweep.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path.string(), 0, 0}, "", "cannot open the file for reading");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError({path.string(), 0, 0}, "", "reading failed");
  return text;
}

void write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SystemError(fmt::format("writing {}: {}", path.string(), std::strerror(errno)));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Calls on_line(text, offset) for each whole line of `path` (text without its '\n'), reading a
// MiB at a time, so a journal of any size is read in bounded memory. Returns the length of the
// whole lines: what follows them is a line cut short.
std::uint64_t for_each_line(const fs::path& path, const std::function<void(std::string_view, std::uint64_t)>& on_line) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError({path.string(), 0, 0}, "", "cannot open the file for reading");
  std::string buffer;
  std::uint64_t buffer_at = 0;  // file offset of buffer[0]
  std::size_t scanned = 0;      // buffer[0, scanned) holds no '\n'
  try {
    for (;;) {
      const std::size_t old = buffer.size();
      buffer.resize(old + (1 << 20));
      const ssize_t n = ::read(fd, buffer.data() + old, 1 << 20);
      if (n < 0 && errno == EINTR) {
        buffer.resize(old);
        continue;
      }
      if (n < 0) throw InputError({path.string(), 0, 0}, "", fmt::format("reading failed: {}", std::strerror(errno)));
      buffer.resize(old + static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (std::size_t nl; (nl = buffer.find('\n', scanned)) != std::string::npos; scanned = start) {
        on_line(std::string_view(buffer).substr(start, nl - start), buffer_at + start);
        start = nl + 1;
      }
      buffer.erase(0, start);
      buffer_at += start;
      scanned = buffer.size();
      if (n == 0) break;
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return buffer_at;
}

// The whole line of the open file `fd` that starts at `offset` (without its '\n').
std::string line_at(int fd, std::uint64_t offset, const fs::path& path) {
  std::string line;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::pread(fd, chunk, sizeof chunk, static_cast<off_t>(offset + line.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw SystemError(fmt::format("reading {} failed: {}", path.string(),
                                    n < 0 ? std::strerror(errno) : "it was cut short while read"));
    const std::string_view got(chunk, static_cast<std::size_t>(n));
    const auto nl = got.find('\n');
    line.append(got.substr(0, nl));
    if (nl != std::string_view::npos) return line;
  }
}

// Ctrl-C: say where the finished points are, then die of the signal as usual.
// The lock file goes too (unlink is async-signal-safe; the lock itself dies with the process).
char g_interrupt_message[1024];
std::size_t g_interrupt_length = 0;
char g_lock_path[4096];
extern "C" void on_interrupt(int sig) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, g_interrupt_message, g_interrupt_length);
  io::unlink_live_temporaries();  // the finished file being written, before its rename
  if (g_lock_path[0] != 0) ::unlink(g_lock_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string cell(const io::Value& v) { return io::csv_cell(v); }

void print_dry_run(const sweep::Sweep& sw, const sweep::Shard& shard, std::int64_t points) {
  Table t;
  std::vector<std::pair<std::string, Table::Align>> cols = {{"point", Table::Align::right}};
  for (const auto& a : sw.axes()) cols.emplace_back(a.column.substr(5), Table::Align::right);
  t.columns(cols);
  constexpr std::size_t kShown = 50;
  for (std::int64_t i = 0; i < points && i < static_cast<std::int64_t>(kShown); ++i) {
    std::vector<std::string> cells = {std::to_string(shard.point(i))};
    for (const auto& v : sw.values(shard.point(i))) {
      std::string c = std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : cell(v);
      cells.push_back(c);
    }
    t.row(cells);
  }
  fmt::print("{}", t.text());
  if (points > static_cast<std::int64_t>(kShown)) fmt::print("... and {} more points\n", points - kShown);
}

// The points of one slice of a sweep (--shard), enumerated (Shard::point), never listed: a sweep
// of 10^7 points holds per point only its line's place in the journal and, when it runs, its number.
struct Slice {
  const sweep::Sweep& sw;
  sweep::Shard shard;
  std::int64_t expected = 0;  // points in the slice
  // A journal line's point, if it is one of this slice's (a line of another slice or out of range
  // is ignored).
  bool ours(std::int64_t p) const { return p >= 0 && p < sw.size() && shard.contains(p); }
  std::size_t index(std::int64_t p) const { return static_cast<std::size_t>(shard.index_of(p)); }
};

struct TableSummary {
  std::int64_t rows = 0, infeasible = 0;
};

// Where each of the slice's points is in the journal (its first line) and the columns its rows
// have, gathered as lines are recovered (resume_or_start) and written (run_points), so the
// finished file is written in one pass over the journal. Memory: 8 bytes per point and the
// column names, whatever the number of rows (issue 22).
// The rows of the points run in this process are also kept, as the journal holds them
// (sweep::as_journaled), while their lines come to at most kKeptBytes: the finished file takes
// those from memory instead of reading them back (62 M of a 128-point sweep's 1,163 M instructions
// went to reading the journal back), and the rest from the journal.
struct JournalIndex {
  static constexpr std::uint64_t kKeptBytes = 2u << 20;  // ~1,000 points of the 8B grid; ~12 MiB of rows (6x)
  std::vector<std::uint64_t> line_of;  // by index in the slice: offset + 1 of its first line, 0 if none
  std::unordered_map<std::size_t, std::vector<io::Row>> kept;  // by index in the slice: its rows, where kept
  std::uint64_t kept_bytes = 0;                                // the kept points' journal lines, in all
  std::set<std::string> keys;
  TableSummary sum;

  explicit JournalIndex(std::int64_t points) : line_of(static_cast<std::size_t>(points), 0) {}
  // Keeps a point's rows (its journal line `line_bytes` long) while within kKeptBytes.
  void keep(std::size_t index, std::uint64_t line_bytes, std::vector<io::Row>& rows) {
    if (kept_bytes + line_bytes > kKeptBytes) return;
    kept_bytes += line_bytes;
    sweep::as_journaled(rows);
    kept[index] = std::move(rows);
  }
  const std::vector<io::Row>* kept_rows(std::size_t index) const {
    const auto it = kept.find(index);
    return it == kept.end() ? nullptr : &it->second;
  }
  bool has(std::size_t index) const { return line_of[index] != 0; }
  // A point's line at `offset`; a later line of the same point is ignored (the first wins).
  // Whether it was the point's first.
  bool add(std::size_t index, std::uint64_t offset, const std::vector<io::Row>& rows) {
    if (has(index)) return false;
    line_of[index] = offset + 1;
    for (const auto& r : rows) {
      for (const auto& [k, v] : r.fields) keys.insert(k);
      const io::Value* f = r.get("feasible");
      if (f && std::holds_alternative<bool>(*f) && !std::get<bool>(*f)) ++sum.infeasible;
      ++sum.rows;
    }
    return true;
  }
};

// What is left to run: the slice's points the journal does not hold yet.
struct Resume {
  std::vector<std::int64_t> todo;
  std::int64_t done_count = 0;
};

// Reads the journal of an earlier run of this sweep, slice and format (a journal of another is an
// error), dropping a last line cut short; or starts a fresh one (its header) when there is none.
Resume resume_or_start(const fs::path& journal, std::uint64_t fingerprint, const Slice& slice, JournalIndex& index) {
  std::error_code ec;
  Resume r;
  bool fresh = true;
  if (fs::exists(journal, ec)) {
    // Read line by line: a resumed journal of millions of points is never held whole.
    bool has_header = false;
    int line = 0;
    const std::uint64_t complete = for_each_line(journal, [&](std::string_view text, std::uint64_t offset) {
      const sweep::JournalLine l = sweep::parse_journal_line(text, ++line, journal.string());
      if (l.is_header) {
        has_header = true;
        if (l.fingerprint != fingerprint)
          throw UsageError(
              fmt::format("{} is the journal of another sweep (the sweep file, its base scenario, --shard or the "
                          "output format changed since): delete it to start over, or choose another --out",
                          journal.string()));
      } else if (slice.ours(l.point) && !index.has(slice.index(l.point))) {
        index.add(slice.index(l.point), offset, l.rows);
        ++r.done_count;
      }
    });
    if (has_header) {
      fresh = false;
      if (complete < fs::file_size(journal)) fs::resize_file(journal, complete);  // drop a line cut short
    } else {
      index = JournalIndex(slice.expected);  // not a journal: started afresh below
    }
  }
  if (fresh) {
    const int fd = ::open(journal.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw SystemError(fmt::format("cannot write {}: {}", journal.string(), std::strerror(errno)));
    write_all(fd, sweep::journal_header(fingerprint), journal);
    ::close(fd);
  }
  for (std::int64_t i = 0; i < slice.expected; ++i)
    if (!index.has(static_cast<std::size_t>(i))) r.todo.push_back(slice.shard.point(i));
  return r;
}

// Ctrl-C from here on says where the finished points are and removes the lock file.
void arm_interrupt(const fs::path& journal, const io::OutputLock& lock) {
  const std::string message = fmt::format(
      "\ninterrupted: the finished points are kept in {}; run the same command again to resume\n", journal.string());
  g_interrupt_length = std::min(message.size(), sizeof g_interrupt_message);
  std::memcpy(g_interrupt_message, message.data(), g_interrupt_length);
  const std::string lock_path = lock.lock_path().string();
  if (lock_path.size() < sizeof g_lock_path) std::memcpy(g_lock_path, lock_path.c_str(), lock_path.size() + 1);
}

// Evaluates `todo` on `threads` workers, appending each point's rows to the journal as it finishes
// (the lock is held: nothing else writes it, so each line's offset is the length before it).
// Returns how many points ran.
std::int64_t run_points(const Slice& slice, const std::vector<std::int64_t>& todo, int threads, const fs::path& journal,
                        JournalIndex& index, ProgressBar& progress) {
  const int fd = ::open(journal.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw SystemError(fmt::format("cannot append to {}: {}", journal.string(), std::strerror(errno)));
  std::int64_t finished = 0;
  try {
    std::uint64_t end = fs::file_size(journal);
    sweep::run(slice.sw, todo, threads, [&](std::int64_t point, std::vector<io::Row>& rows) {
      const std::string line = sweep::journal_line(point, rows);
      write_all(fd, line, journal);  // one write: a whole line, or a cut last line
      const std::size_t i = slice.index(point);
      if (index.add(i, end, rows)) index.keep(i, line.size(), rows);
      end += line.size();
      progress.update(++finished);
    });
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return finished;
}

// The finished file, from the journal in point order (so a resumed run writes exactly what an
// uninterrupted one does), streamed: the index knows each point's line and the columns, so one
// pass copies the rows point by point into the file being written (a point's kept rows from
// memory). Memory: the index, the kept rows (at most kKeptBytes of journal) and one point's rows,
// whatever the number of rows (issue 22).
TableSummary write_table(const fs::path& journal, const fs::path& out, sweep::OutputFormat format, const Slice& slice,
                         const JournalIndex& index) {
  for (std::int64_t i = 0; i < slice.expected; ++i)
    if (!index.has(static_cast<std::size_t>(i)))
      throw SystemError(fmt::format("point {} is missing from {}", slice.shard.point(i), journal.string()));
  std::vector<std::string> axis_columns;
  for (const auto& a : slice.sw.axes()) axis_columns.push_back(a.column);
  const std::vector<std::string> columns = sweep::column_order({index.keys.begin(), index.keys.end()}, axis_columns);
  io::AtomicFile file(out);
  file.append(sweep::table_header(format, columns));
  const int in = ::open(journal.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw SystemError(fmt::format("cannot read {}: {}", journal.string(), std::strerror(errno)));
  try {
    for (std::size_t i = 0; i < index.line_of.size(); ++i) {
      if (const auto* rows = index.kept_rows(i)) {
        file.append(sweep::table_lines(format, *rows, columns));
        continue;
      }
      const sweep::JournalLine l =
          sweep::parse_journal_line(line_at(in, index.line_of[i] - 1, journal), 0, journal.string());
      file.append(sweep::table_lines(format, l.rows, columns));
    }
  } catch (...) {
    ::close(in);
    throw;
  }
  ::close(in);
  file.commit();
  return index.sum;
}

}  // namespace

int cmd_sweep(const std::vector<std::string>& argv) {
  auto options =
      std::vector<OptionSpec>{{"zoo", true, "model zoo folder (default: $FTPLAN_ZOO, else the shipped model_zoo)"}};
  options.push_back({"out", true, "results file: .csv or .jsonl (JSON Lines); resumes from its .part journal"});
  options.push_back({"threads", true, "worker threads (default: all cores)"});
  options.push_back({"shard", true, "K/N: run only the K-th of N disjoint slices of the points (Slurm job arrays)"});
  options.push_back({"dry-run", false, "list the points and their axis values; simulate nothing"});
  options.push_back({"quiet", false, "no progress on stderr"});
  const Args args(argv, 2, options);
  if (args.positionals().size() != 1) throw UsageError("usage: ftplan sweep SWEEP.yaml --out results.csv|.jsonl");
  App app(args);
  const fs::path file = args.positionals()[0];
  const sweep::Sweep sw = sweep::Sweep::load(file, app.zoo(), app.catalog());
  sweep::Shard shard;
  if (auto s = args.value("shard")) shard = sweep::parse_shard(*s);
  const int threads = parse_threads(args);
  const Slice slice{sw, shard, shard.size_of(sw.size())};
  const std::int64_t expected = slice.expected;

  if (args.flag("dry-run")) {
    fmt::print("{}: {} points{}\n", sw.name(), expected,
               shard.count > 1 ? fmt::format(" in shard {}/{} (of {})", shard.index, shard.count, sw.size()) : "");
    print_dry_run(sw, shard, expected);
    return 0;
  }
  const auto out_arg = args.value("out");
  if (!out_arg) throw UsageError("--out FILE is required: the results file (.csv or .jsonl)");
  const fs::path out = *out_arg;
  const sweep::OutputFormat format = sweep::output_format(out);
  // One sweep at a time on this output: a second one would compute everything again and write
  // its points into the same journal.
  const io::OutputLock lock(out, "sweep");
  const fs::path journal = out.string() + ".part";
  // The journal belongs to this sweep, this slice and this format, and nothing else.
  const std::uint64_t fingerprint =
      sw.fingerprint() ^
      (std::hash<std::string>{}(fmt::format("{}/{}:{}", shard.index, shard.count, static_cast<int>(format))) *
       0x9E3779B97F4A7C15ull);
  const bool quiet = args.flag("quiet");
  JournalIndex index(expected);
  Resume resume = resume_or_start(journal, fingerprint, slice, index);

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int workers = static_cast<int>(
      std::min<std::size_t>(threads > 0 ? threads : cores, std::max<std::size_t>(1, resume.todo.size())));
  if (!quiet) {
    fmt::print(stderr, "{}: {} points{}{}, {} threads -> {}\n", sw.name(), expected,
               shard.count > 1 ? fmt::format(" (shard {}/{} of {})", shard.index, shard.count, sw.size()) : "",
               resume.done_count == 0
                   ? ""
                   : fmt::format(", {} done before (resuming from {})", resume.done_count, journal.string()),
               workers, out.string());
  }

  arm_interrupt(journal, lock);
  auto* previous_int = std::signal(SIGINT, on_interrupt);
  auto* previous_term = std::signal(SIGTERM, on_interrupt);
  ProgressBar progress("sweep", "points", expected, resume.done_count, !quiet);
  const std::int64_t finished = run_points(slice, resume.todo, threads, journal, index, progress);
  progress.finish(finished);
  const std::size_t simulated = resume.todo.size();
  resume.todo = std::vector<std::int64_t>();

  const TableSummary sum = write_table(journal, out, format, slice, index);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  g_lock_path[0] = 0;
  std::error_code ec;
  fs::remove(journal, ec);
  const double t = progress.elapsed_s();
  fmt::print(stderr, "{}: wrote {} rows ({} points, {} infeasible) to {}; {} simulated in {} ({:.1f} points/s)\n",
             sw.name(), sum.rows, expected, sum.infeasible, out.string(), simulated, ftplan::format_duration(t),
             t > 0 ? static_cast<double>(simulated) / t : 0.0);
  return 0;
}

int cmd_sweep_merge(const std::vector<std::string>& argv) {
  const std::vector<OptionSpec> options = {{"out", true, "merged results file (.csv or .jsonl, as the shards)"}};
  const Args args(argv, 2, options);
  const auto out_arg = args.value("out");
  if (!out_arg || args.positionals().empty())
    throw UsageError("usage: ftplan sweep-merge --out results.csv SHARD.csv...");
  const fs::path out = *out_arg;
  const sweep::OutputFormat format = sweep::output_format(out);
  for (const auto& in : args.positionals())
    if (sweep::output_format(in) != format)
      throw UsageError(fmt::format("'{}' is not in the format of --out '{}'", in, out.string()));
  // The same lock as `sweep` on its --out: a merge and a sweep (or two merges) never write one
  // file at once.
  const io::OutputLock lock(out, "sweep-merge");
  std::vector<sweep::MergeInput> inputs;
  for (const auto& in : args.positionals()) {
    std::error_code ec;
    if (fs::exists(fs::path(in + ".part"), ec))
      throw InputError({in, 0, 0}, "",
                       fmt::format("{}.part is beside it: that shard has not finished (rerun it to complete it)", in));
    if (!fs::is_regular_file(in, ec)) throw InputError({in, 0, 0}, "", "no such file");
    // A sweep still writing it holds its lock (looked at, not taken: nothing is created beside it).
    if (const auto held = io::output_lock_holder(in))
      throw InputError({in, 0, 0}, "",
                       fmt::format("{} (pid {}) is still writing it: merge when it has finished",
                                   held->second.empty() ? "a process" : "ftplan " + held->second, held->first));
    inputs.push_back({in, read_file(in)});
  }
  const sweep::Merged m = sweep::merge(format, inputs);
  io::write_file_atomically(out, m.text);
  fmt::print(stderr, "merged {} files: {} points, {} rows -> {}\n", inputs.size(), m.points, m.rows, out.string());
  return 0;
}

}  // namespace ftplan::cli
