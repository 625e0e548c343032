#include "hardware/profile.hpp"

namespace ftplan::hardware {

const char* to_string(CopyDirection d) {
  switch (d) {
    case CopyDirection::h2d: return "h2d";
    case CopyDirection::d2h: return "d2h";
    case CopyDirection::bidir: return "bidir";
    case CopyDirection::d2d: return "d2d";
    case CopyDirection::h2h: return "h2h";
  }
  return "?";
}

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

const char* to_string(StorageOp op) {
  switch (op) {
    case StorageOp::read: return "read";
    case StorageOp::write: return "write";
    case StorageOp::randread: return "randread";
    case StorageOp::randwrite: return "randwrite";
  }
  return "?";
}

}  // namespace ftplan::hardware
