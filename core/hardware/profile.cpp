#include "hardware/profile.hpp"

namespace ftplan::hardware {

const char* to_string(CopyDirection d) { return name_of(d); }

const char* to_string(CollectiveOp op) { return name_of(op); }

const char* to_string(StorageOp op) { return name_of(op); }

}  // namespace ftplan::hardware
