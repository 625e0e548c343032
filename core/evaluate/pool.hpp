// The one worker pool of the verbs that evaluate many plans (`plan`, `sweep`): tasks numbered
// 0..count-1 on a fixed set of threads, a task's exception handed back as that task's, never
// the end of the process (an exception escaping a std::thread calls std::terminate).
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>

namespace ftplan::evaluate {

// Runs task(i) for every i in [0, count) on `threads` workers (0: all cores; the calling thread
// is one of them), each index once, in increasing order of start. If task(i) throws, failed(i,
// the exception) is called on that worker and the others go on; failed() itself must not throw.
// Once `stop` (may be null) is true no further task starts; the running ones finish.
// Returns how many tasks ran (count, unless stopped).
std::size_t for_each(std::size_t count, int threads, const std::function<void(std::size_t)>& task,
                     const std::function<void(std::size_t, std::exception_ptr)>& failed,
                     const std::atomic<bool>* stop = nullptr);

// Workers for_each uses for `threads` (0: all cores) and `count` tasks: at least 1, at most count.
std::size_t workers(int threads, std::size_t count);

}  // namespace ftplan::evaluate
