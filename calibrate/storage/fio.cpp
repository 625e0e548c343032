#include "calibrate/storage/fio.hpp"
#include "common/error.hpp"
#include "runtime/uring.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace ftplan::calibrate::storage {

namespace fs = std::filesystem;

std::optional<fs::path> find_fio() {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / "fio";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::vector<std::string> fio_arguments(const std::vector<runtime::ScratchFile*>& files,
                                       const runtime::IoPattern& pattern, double duration_s) {
  const auto ms = static_cast<long>(std::lround(duration_s * 1000));
  std::vector<std::string> args = {
      "--output-format=json",
      "--group_reporting",
      "--ioengine=io_uring",
      "--direct=1",
      fmt::format("--rw={}", hardware::to_string(pattern.op)),
      fmt::format("--bs={}", pattern.block_bytes),
      fmt::format("--iodepth={}", pattern.queue_depth),
      "--time_based",
      fmt::format("--runtime={}ms", std::max(1L, ms)),
      "--randrepeat=1",
      "--norandommap",
      // Only ever the calibration's own, already written files: never create, extend or lay out one.
      "--allow_file_create=0",
      "--fallocate=none",
      "--invalidate=0",
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    args.push_back(fmt::format("--name=ftplan{}", i));
    args.push_back("--filename=" + files[i]->path().string());
    args.push_back(fmt::format("--size={}", files[i]->size()));
  }
  return args;
}

FioResult parse_fio_json(const std::string& text, hardware::StorageOp op) {
  const auto brace = text.find("{\n");
  const auto start = brace == std::string::npos ? text.find('{') : brace;
  if (start == std::string::npos) throw SystemError("fio printed no JSON result: " + text.substr(0, 300));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.substr(start));
  } catch (const nlohmann::json::exception& e) {
    throw SystemError(std::string("cannot read fio's JSON output: ") + e.what());
  }
  if (!doc.contains("jobs") || !doc["jobs"].is_array() || doc["jobs"].empty())
    throw SystemError("fio's JSON output holds no job");
  const auto& job = doc["jobs"][0];
  if (job.value("error", 0) != 0) throw SystemError(fmt::format("fio reported error {}", job.value("error", 0)));
  const char* side = (op == hardware::StorageOp::write || op == hardware::StorageOp::randwrite) ? "write" : "read";
  if (!job.contains(side)) throw SystemError(fmt::format("fio's job result has no '{}' part", side));
  const auto& r = job[side];
  return {r.value("bw_bytes", 0.0), r.value("iops", 0.0)};
}

FioResult run_fio(const fs::path& fio, const std::vector<runtime::ScratchFile*>& files,
                  const runtime::IoPattern& pattern, double duration_s) {
  std::vector<std::string> args = fio_arguments(files, pattern, duration_s);
  args.insert(args.begin(), fio.string());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) throw SystemError("cannot create a pipe for fio");
  // fio dies with calibrate (issue 45: a killed calibrate's fio ran on for 1-2 s, writing to the
  // scratch file the next run removes): the child asks the kernel for SIGKILL when its parent
  // thread exits (prctl PR_SET_PDEATHSIG), and exits at once if the parent is already gone.
  // Between fork and exec only async-signal-safe calls (POSIX fork: a multithreaded process).
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
    dup2(pipe_fd[1], STDOUT_FILENO);
    dup2(pipe_fd[1], STDERR_FILENO);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    execve(fio.c_str(), argv.data(), environ);
    _exit(127);
  }
  const int spawn_errno = errno;
  close(pipe_fd[1]);
  if (pid < 0) {
    close(pipe_fd[0]);
    throw SystemError(fmt::format("cannot run {}: {}", fio.string(), std::strerror(spawn_errno)));
  }
  std::string out;
  std::array<char, 8192> buf{};
  for (;;) {
    const ssize_t n = read(pipe_fd[0], buf.data(), buf.size());
    if (n > 0)
      out.append(buf.data(), static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(pipe_fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw SystemError(fmt::format("fio failed (status {}): {}", status, out.substr(0, 500)));
  return parse_fio_json(out, pattern.op);
}

}  // namespace ftplan::calibrate::storage
