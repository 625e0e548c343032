// Event queues of the discrete-event engine: a min-heap of timed events and an indexed min-heap
// whose entries can be moved or removed (flow completions, rescheduled whenever rates change).
// Both order by (time, seq): `seq` is a counter the engine hands out as it schedules, so equal
// times break by insertion order and runs are repeatable.
//
// Both are 4-ary heaps: half the depth of a binary heap, and the four children of a node share a
// cache line or two, which is what a pop costs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ftplan::des::detail {

struct Event {
  std::int64_t time = 0;   // nanoseconds
  std::uint64_t seq = 0;   // insertion order
  std::uint32_t id = 0;    // what the event is about (a task, a flow slot)
  std::uint32_t type = 0;  // the engine's own event kind
};

// Without short-circuit: inside a heap the outcome is a coin flip, so a branch would mispredict
// half the time; this compiles to flag arithmetic. Times are >= 0 (nanoseconds since the run's
// start), so (time, seq) orders as one 128-bit number: a compare and a subtract with borrow
// where the two-part form took six instructions (des_bench, callgrind).
#if defined(__SIZEOF_INT128__)
__extension__ typedef unsigned __int128 TimeSeq;  // GCC and Clang (__extension__: not ISO C++)
#endif
inline bool earlier(std::int64_t time_a, std::uint64_t seq_a, std::int64_t time_b, std::uint64_t seq_b) {
#if defined(__SIZEOF_INT128__)
  return ((TimeSeq(static_cast<std::uint64_t>(time_a)) << 64) | seq_a) <
         ((TimeSeq(static_cast<std::uint64_t>(time_b)) << 64) | seq_b);
#else
  return (time_a < time_b) | ((time_a == time_b) & (seq_a < seq_b));
#endif
}
inline bool earlier(const Event& a, const Event& b) { return earlier(a.time, a.seq, b.time, b.seq); }

// Min-heap of events by (time, seq).
class EventHeap {
 public:
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  void clear() { heap_.clear(); }

  void push(const Event& e) {
    heap_.push_back(e);
    sift_up(heap_.size() - 1);
  }

  Event pop() {
    Event e = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return e;
  }

 private:
  static constexpr std::size_t kArity = 4;

  void sift_up(std::size_t i) {
    const Event e = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!earlier(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  void sift_down(std::size_t i) {
    const Event e = heap_[i];
    const std::size_t n = heap_.size();
    for (;;) {
      const std::size_t first = i * kArity + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t last = first + kArity < n ? first + kArity : n;
      for (std::size_t c = first + 1; c < last; ++c) best = earlier(heap_[c], heap_[best]) ? c : best;
      if (!earlier(heap_[best], e)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
};

// Min-heap over slots 0..n-1, each present at most once, keyed by (time, seq). set() inserts or
// moves a slot, erase() removes one; both O(log n). No stale entries are ever left behind, so a
// flow whose rate changes a thousand times still has exactly one entry.
class IndexedHeap {
 public:
  static constexpr std::uint32_t kAbsent = 0xffffffffu;

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  std::uint32_t top_slot() const { return heap_.front().slot; }
  std::int64_t top_time() const { return heap_.front().time; }
  std::uint64_t top_seq() const { return heap_.front().seq; }
  bool contains(std::uint32_t slot) const { return slot < pos_.size() && pos_[slot] != kAbsent; }

  void set(std::uint32_t slot, std::int64_t time, std::uint64_t seq) {
    if (slot >= pos_.size()) pos_.resize(slot + 1, kAbsent);
    std::size_t i = pos_[slot];
    if (i == kAbsent) {
      i = heap_.size();
      heap_.push_back({time, seq, slot});
      pos_[slot] = static_cast<std::uint32_t>(i);
      sift_up(i);
      return;
    }
    const bool sooner = earlier(time, seq, heap_[i].time, heap_[i].seq);
    heap_[i].time = time;
    heap_[i].seq = seq;
    if (sooner)
      sift_up(i);
    else
      sift_down(i);
  }

  void erase(std::uint32_t slot) {
    if (!contains(slot)) return;
    const std::size_t i = pos_[slot];
    pos_[slot] = kAbsent;
    const Node last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    heap_[i] = last;
    pos_[last.slot] = static_cast<std::uint32_t>(i);
    if (i > 0 && earlier(last.time, last.seq, heap_[(i - 1) / kArity].time, heap_[(i - 1) / kArity].seq))
      sift_up(i);
    else
      sift_down(i);
  }

 private:
  static constexpr std::size_t kArity = 4;
  struct Node {
    std::int64_t time;
    std::uint64_t seq;
    std::uint32_t slot;
  };

  static bool before(const Node& a, const Node& b) { return earlier(a.time, a.seq, b.time, b.seq); }

  void place(std::size_t i, const Node& n) {
    heap_[i] = n;
    pos_[n.slot] = static_cast<std::uint32_t>(i);
  }

  void sift_up(std::size_t i) {
    const Node n = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!before(n, heap_[parent])) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, n);
  }

  void sift_down(std::size_t i) {
    const Node n = heap_[i];
    const std::size_t size = heap_.size();
    for (;;) {
      const std::size_t first = i * kArity + 1;
      if (first >= size) break;
      std::size_t best = first;
      const std::size_t last = first + kArity < size ? first + kArity : size;
      for (std::size_t c = first + 1; c < last; ++c)
        if (before(heap_[c], heap_[best])) best = c;
      if (!before(heap_[best], n)) break;
      place(i, heap_[best]);
      i = best;
    }
    place(i, n);
  }

  std::vector<Node> heap_;
  std::vector<std::uint32_t> pos_;  // slot -> index in heap_, kAbsent when not queued
};

}  // namespace ftplan::des::detail
