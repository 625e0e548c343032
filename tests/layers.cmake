# The include rule of core/ (docs/architecture.md, "Dependencies point one way"), checked on every
# test run: each area of core/ stands on a floor and includes only areas on lower floors, with the
# exceptions named below; nothing in core/ includes Qt, CUDA or iostream (core does not print).
# A new upward arrow fails here, naming the file, its line and the include.
#   cmake -DSOURCE_DIR=<repo> -P tests/layers.cmake
cmake_minimum_required(VERSION 3.20)

# Floors, lowest first. An area includes its own files and those of any lower floor.
set(floors
    "common"        # 0: strings, units, errors
    "des model hardware"  # 1: the generic discrete-event kernel (FTPLAN_ASSERT from common, no LLM word); model
                          #    shapes and the zoo; catalog specs and calibration profiles
    "plan"          # 2: a plan: job, cluster, parallelism, framework profiles
    "inventory"     # 3: a rank's tensors
    "footprint"     # 4: fits? peaks
    "schedule"      # 5: the step IR (footprint's paged placement, so both engines place alike)
    "sim"           # 6: the simulator
    "cost"          # 7: power, energy, dollars
    "evaluate"      # 8: one plan through the chain
    "planner present"  # 9: searches; a comparison in words and cells (verdict, advice, answer, money)
    "io"            # 10: files and words
    "sweep")        # 11: sweeps, their files and journals
# Includes allowed across the rule, each with its reason: AREA:FILE.
set(exceptions
    # cost stands above sim in the chain but reads only the timeline of a simulated step.
    "cost:sim/timeline.hpp")

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "give -DSOURCE_DIR=<repository root>")
endif()
set(floor 0)
foreach(row IN LISTS floors)
  string(REPLACE " " ";" areas "${row}")
  foreach(a IN LISTS areas)
    set(floor_of_${a} ${floor})
  endforeach()
  math(EXPR floor "${floor} + 1")
endforeach()

file(GLOB areas RELATIVE "${SOURCE_DIR}/core" "${SOURCE_DIR}/core/*")
set(problems "")
foreach(area IN LISTS areas)
  if(NOT IS_DIRECTORY "${SOURCE_DIR}/core/${area}")
    continue()
  endif()
  if(NOT DEFINED floor_of_${area})
    string(APPEND problems "core/${area}/: an area with no floor in tests/layers.cmake: give it one\n")
    continue()
  endif()
  file(GLOB_RECURSE files "${SOURCE_DIR}/core/${area}/*.hpp" "${SOURCE_DIR}/core/${area}/*.cpp")
  foreach(path IN LISTS files)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${path}")
    file(STRINGS "${path}" lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<(Q[A-Za-z]*|cuda[A-Za-z_]*\\.h|cublas[A-Za-z_]*\\.h|iostream)>")
        string(APPEND problems "${rel}:${n}: includes <${CMAKE_MATCH_1}>: core holds no Qt, CUDA or printing\n")
      elseif(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"(\\.\\./)")
        string(APPEND problems "${rel}:${n}: a relative include across areas: write it from core/ (\"area/file.hpp\")\n")
      elseif(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([a-z_]+)/([^\"]+)\"")
        set(to "${CMAKE_MATCH_1}")
        set(file "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
        if(to STREQUAL area OR NOT DEFINED floor_of_${to})
          continue()  # its own area, or not core (fmt/, boost/, yaml-cpp/ ...)
        endif()
        if(NOT floor_of_${to} LESS floor_of_${area} AND NOT "${area}:${file}" IN_LIST exceptions)
          string(APPEND problems "${rel}:${n}: ${area} (floor ${floor_of_${area}}) includes \"${file}\" "
                                 "(${to}, floor ${floor_of_${to}}): an arrow up the layers of docs/architecture.md\n")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "core's include rule is broken:\n${problems}")
endif()
message(STATUS "core's include rule holds: ${floor} floors, no arrow up")
