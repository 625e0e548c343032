// The files ftplan writes: replaced whole or not at all (a failed write keeps the old file and
// leaves no temporary behind), and one writer at a time through the output lock.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/output_file.hpp"
#include "test_support.hpp"

using namespace ftplan;
namespace fs = std::filesystem;

namespace {

struct Folder {
  fs::path path;
  explicit Folder(const std::string& name) : path(test::scratch_path(name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file-size limit (ulimit -f) set low for one scope: a write past it fails with EFBIG, as on
// a full disk, for root too. SIGXFSZ is ignored meanwhile, so the write fails instead of killing us.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit low = old;
    low.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &low);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};

}  // namespace

TEST_CASE("a file written atomically replaces the old one whole, keeps its mode, and leaves nothing beside it") {
  Folder dir("atomic");
  const fs::path p = dir.path / "profile.yaml";
  io::write_file_atomically(p, "first\n");
  CHECK(read(p) == "first\n");
  ::chmod(p.c_str(), 0640);
  io::write_file_atomically(p, "second, longer\n");
  CHECK(read(p) == "second, longer\n");
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  CHECK(dir.names() == std::vector<std::string>{"profile.yaml"});
}

TEST_CASE("a write that fails midway (disk full, file too large) keeps the old file and removes its temporary") {
  /* 64 KiB of new text under a 4 KiB file-size limit: the write fails after 4 KiB, as a full disk
   * would. Before atomic writes the old file was truncated first and left holding 4 KiB. */
  Folder dir("atomic-fail");
  const fs::path p = dir.path / "trace.json";
  io::write_file_atomically(p, "old\n");
  const std::string big(64 << 10, 'x');
  {
    FileSizeLimit limit(4 << 10);
    CHECK_THROWS_WITH_AS(io::write_file_atomically(p, big), doctest::Contains(p.string().c_str()), std::runtime_error);
  }
  CHECK(read(p) == "old\n");
  CHECK(dir.names() == std::vector<std::string>{"trace.json"});
  /* A directory that is not there: the error names the file; nothing is created. */
  CHECK_THROWS_WITH_AS(io::write_file_atomically(dir.path / "no" / "x.json", "x"), doctest::Contains("no/x.json"),
                       std::runtime_error);
  CHECK_THROWS_AS(io::check_file_writable(dir.path / "no" / "x.json"), SystemError);
  CHECK_THROWS_WITH_AS(io::check_file_writable(dir.path), doctest::Contains("is a directory"), SystemError);
  io::check_file_writable(p);
  CHECK(dir.names() == std::vector<std::string>{"trace.json"});
}

TEST_CASE("a signal handler removes the temporaries being written (unlink_live_temporaries)") {
  /* What SIGINT/SIGTERM do in the CLI before the process dies: a half-written trace or sweep
   * result leaves no ".NAME.PID.N.R.tmp" behind (it once stayed, up to the whole 31 MB trace). */
  Folder dir("atomic-signal");
  const fs::path p = dir.path / "trace.json";
  io::write_file_atomically(p, "old\n");
  {
    io::AtomicFile f(p);
    f.append(std::string(2 << 20, 'x'));  // past the buffer: on disk in the temporary
    CHECK(dir.names().size() == 2);
    io::unlink_live_temporaries();
    CHECK(dir.names() == std::vector<std::string>{"trace.json"});
  }
  CHECK(read(p) == "old\n");
  /* A symbolic link is followed: the file it names is replaced, the link stays a link. */
  ::symlink("trace.json", (dir.path / "link.json").c_str());
  io::write_file_atomically(dir.path / "link.json", "through the link\n");
  CHECK(read(p) == "through the link\n");
  CHECK(fs::is_symlink(dir.path / "link.json"));
}

TEST_CASE("the output lock: one holder at a time, the holder and its pid in the refusal, a stale lock taken over") {
  Folder dir("lock");
  const fs::path out = dir.path / "results.csv";
  const std::string pid = std::to_string(::getpid());
  {
    const io::OutputLock first(out, "sweep-merge");
    CHECK(first.lock_path() == dir.path / "results.csv.lock");
    CHECK(read(first.lock_path()) == pid + " sweep-merge\n");
    /* flock locks belong to the open file, so a second open in this same process is refused as
     * another process would be, and told who holds it: the sweep-merge, not "a sweep". */
    try {
      const io::OutputLock second(out, "sweep");
      FAIL("a second lock on the same output was granted");
    } catch (const io::OutputLocked& e) {
      CHECK(e.pid() == ::getpid());
      CHECK(e.holder() == "sweep-merge");
      CHECK(std::string(e.what()) == out.string() + ": another ftplan sweep-merge writes this file, pid " + pid +
                                         " (lock " + (dir.path / "results.csv.lock").string() + ")");
    }
    CHECK(fs::exists(first.lock_path()));  // the refused one did not remove the holder's file
  }
  CHECK(dir.names().empty());  // released: the lock file is gone
  {
    const io::OutputLock first(out, "sweep");
    try {
      const io::OutputLock second(out, "sweep-merge");
      FAIL("a second lock on the same output was granted");
    } catch (const io::OutputLocked& e) {
      CHECK(e.holder() == "sweep");
      CHECK(std::string(e.what()).find(": another ftplan sweep writes this file, pid " + pid + " (lock") !=
            std::string::npos);
    }
  }
  /* A lock file left by a process that died (no one holds the lock on it) is simply taken. */
  std::ofstream(dir.path / "results.csv.lock") << "999999\n";
  {
    const io::OutputLock again(out, "sweep");
    CHECK(read(again.lock_path()) == pid + " sweep\n");
  }
  CHECK(dir.names().empty());
}
