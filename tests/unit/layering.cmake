# The layers' one-way arrows (docs/architecture.md), checked on the sources:
# `cmake -DROOT=<source dir> -P layering.cmake` fails naming every #include
# that points the wrong way. The CTest test `layering` runs it (label unit).
#
#   core/  <-  control/ (+ proto/)  <-  coordinator/, worker/  <-  dashboard/  <-  cli/, bench/
#
# and inside core/: common <- tensor <- nn, data <- comm <- ddp, perf <- train,
# with the job's configuration (core/train/config.h, mixed_precision.h: the
# library mddp_train_config) needing nothing else of core/train.
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<microddp source dir> -P layering.cmake")
endif()

set(violations "")
# check(FOLDER WHY FORBIDDEN_PREFIX...): no file under FOLDER includes a header
# under any FORBIDDEN_PREFIX.
function(check folder why)
  file(GLOB_RECURSE files RELATIVE ${ROOT} ${ROOT}/${folder}/*.h ${ROOT}/${folder}/*.cc ${ROOT}/${folder}/*.cu
       ${ROOT}/${folder}/*.cuh)
  foreach(f IN LISTS files)
    file(STRINGS ${ROOT}/${f} includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
      foreach(prefix IN LISTS ARGN)
        string(FIND "${header}" "${prefix}" at)
        if(at EQUAL 0)
          list(APPEND violations "${f} includes ${header}: ${why}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()

# The top-level layers.
check(core "core/ is the engine and stands alone" control/ coordinator/ worker/ dashboard/ cli/ labs/ bench/ proto/)
check(control "control/ is shared by the coordinator and the worker and owned by neither"
      coordinator/ worker/ dashboard/ cli/ labs/ bench/)
check(coordinator "the coordinator speaks to the worker only through control/" worker/ dashboard/ cli/ labs/ bench/)
check(worker "the worker speaks to the coordinator only through control/ (docs/architecture.md)"
      coordinator/ dashboard/ cli/ labs/ bench/)
check(dashboard "the dashboard reads the coordinator's job, never a worker" worker/ cli/ labs/ bench/)
check(labs "the Labs build on core/ only" control/ coordinator/ worker/ dashboard/ cli/ bench/ proto/)

# Inside core/: each layer includes only those below it.
check(core/common "core/common is the bottom layer"
      core/tensor/ core/nn/ core/data/ core/comm/ core/ddp/ core/perf/ core/train/)
check(core/tensor "core/tensor includes core/common only" core/nn/ core/data/ core/comm/ core/ddp/ core/perf/ core/train/)
check(core/nn "core/nn includes core/tensor and below" core/comm/ core/ddp/ core/perf/ core/train/)
check(core/data "core/data includes core/tensor and below" core/comm/ core/ddp/ core/perf/ core/train/)
check(core/comm "core/comm includes core/common and below" core/ddp/ core/perf/ core/train/)
check(core/ddp "core/ddp and core/perf stand side by side" core/perf/ core/train/)
check(core/perf "core/perf reads comm::CommSpan (core/comm/span.h), never core/ddp" core/ddp/ core/train/)

# The job's configuration is a library of its own (mddp_train_config): it
# needs nothing of the trainer, so the coordinator can link it alone.
foreach(f config.h config.cc mixed_precision.h mixed_precision.cc)
  file(STRINGS ${ROOT}/core/train/${f} includes REGEX "^#include \"core/train/")
  foreach(line IN LISTS includes)
    if(NOT line MATCHES "core/train/(config|mixed_precision)\\.h")
      list(APPEND violations "core/train/${f}: ${line}: the job config (mddp_train_config) needs no trainer")
    endif()
  endforeach()
endforeach()

# The same arrows between the libraries (the CMakeLists.txt files): the worker
# links no coordinator library, control/ neither side's, the coordinator not
# the trainer.
# forbid_link(CMAKELISTS WHY REGEX...): no line of CMAKELISTS (comments aside) matches a REGEX.
function(forbid_link cmakelists why)
  file(STRINGS ${ROOT}/${cmakelists} lines)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "#.*" "" code "${line}")
    foreach(re IN LISTS ARGN)
      if(code MATCHES "${re}")
        string(STRIP "${CMAKE_MATCH_0}" lib)
        list(APPEND violations "${cmakelists} links ${lib}: ${why}")
      endif()
    endforeach()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()
forbid_link(worker/CMakeLists.txt "the worker links control/'s libraries, not the coordinator's" "mddp_coordinator[a-z_]*")
forbid_link(control/CMakeLists.txt "control/ is owned by neither side" "mddp_coordinator[a-z_]*" "mddp_worker")
forbid_link(coordinator/CMakeLists.txt "the coordinator needs the job config (mddp_train_config), not the trainer"
            "mddp_train( |\\)|$)" "mddp_worker")

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "includes against the layers (docs/architecture.md):\n  ${text}")
endif()
message(STATUS "layering: every include points one way")
