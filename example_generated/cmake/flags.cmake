# Compiler flags of every target: the optimisation level, OpenMP, the sanitizers.
#
# Two levels, each target at one of them (backend_optimise below refuses any other):
#   BACKEND_LOOP_LEVEL  -O3  the element loops: the driver and the operator library (no torch), where
#                            -O1 would lose the loops' vectorisation
#   BACKEND_HOST_LEVEL  -O1  every torch-using target (core, aten, autocast, the features, the module):
#                            they check arguments, describe tensors to the library and keep books, and
#                            most of their compile time is optimising inline code from torch's headers
# The template's docs/build-speed.md has the measurements behind each level.
set(BACKEND_LOOP_LEVEL -O3)
set(BACKEND_HOST_LEVEL -O1)

# The build type's own flags (-O3 -DNDEBUG for Release, ...) are not used: the levels below are.
set(CMAKE_BUILD_TYPE "" CACHE STRING "not used: see cmake/flags.cmake" FORCE)

set(SANITIZERS address undefined thread)
string(REPLACE "," ";" sanitize_list "${SANITIZE}")
foreach(name IN LISTS sanitize_list)
  if(NOT name IN_LIST SANITIZERS)
    message(FATAL_ERROR "SANITIZE: unknown sanitizer ${name} (known: address, undefined, thread)")
  endif()
endforeach()
if("thread" IN_LIST sanitize_list AND NOT sanitize_list STREQUAL "thread")
  message(FATAL_ERROR "SANITIZE: thread cannot be combined with other sanitizers")
endif()

# -fopenmp: the emulated device runs a kernel's blocks on an OpenMP team, and ATen's
# at::parallel_for (large copies) is serial without it; the module shares the libgomp torch loads.
add_compile_options(-fopenmp)
add_link_options(-fopenmp)
if(SANITIZE)
  # -O1 keeps the reports' stack traces close to the source at a fraction of -O0's slowdown.
  add_compile_options(-fsanitize=${SANITIZE} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${SANITIZE})
endif()

# backend_optimise(<target> <level>): the target's optimisation level, BACKEND_LOOP_LEVEL or
# BACKEND_HOST_LEVEL (as its value), unless DEBUG or SANITIZE decide it for the whole build.
function(backend_optimise target level)
  if(NOT level STREQUAL BACKEND_LOOP_LEVEL AND NOT level STREQUAL BACKEND_HOST_LEVEL)
    message(FATAL_ERROR "backend_optimise(${target} ${level}): the build has two levels, "
                        "${BACKEND_LOOP_LEVEL} for element loops and ${BACKEND_HOST_LEVEL} for the rest (cmake/flags.cmake)")
  endif()
  if(DEBUG)
    target_compile_options(${target} PRIVATE -O0 -g)
  elseif(SANITIZE)
    target_compile_options(${target} PRIVATE -O1)
  else()
    target_compile_options(${target} PRIVATE ${level} -g0)
  endif()
endfunction()

# backend_torch_layer(<target>): a target that includes torch's headers. UNITY compiles its sources
# as one translation unit (they stay one file per integration point; a clash of names between two
# files is a compile error, never a silent change). The macros a file defines to configure torch's
# headers for itself are undefined after it, so that the next file of the unit starts clean.
# PCH starts it from the precompiled header of ${NAME}_precompiled (csrc/precompiled.h).
function(backend_torch_layer target)
  target_link_libraries(${target} PUBLIC torch_headers)
  set_target_properties(${target} PROPERTIES
    UNITY_BUILD ${UNITY}
    UNITY_BUILD_BATCH_SIZE 0
    UNITY_BUILD_CODE_AFTER_INCLUDE "#undef TORCH_ASSERT_ONLY_METHOD_OPERATORS\n#undef AT_PER_OPERATOR_HEADERS")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's garbage collector runs whenever its heap grew by 30% (a 1 GB unit of torch's headers
    # collects many times): collecting only above 2 GB saves 7 to 9% of each unit's CPU for about
    # 0.3 GB more memory per compile job (the template's docs/build-speed.md). Not code generation.
    target_compile_options(${target} PRIVATE --param=ggc-min-expand=400 --param=ggc-min-heapsize=2097152)
  endif()
  if(PCH)
    target_precompile_headers(${target} REUSE_FROM ${NAME}_precompiled)
    # GCC ignores a precompiled header built with other flags and parses the headers instead: say so.
    target_compile_options(${target} PRIVATE -Winvalid-pch)
  endif()
endfunction()

# PCH: the target that compiles csrc/precompiled.h once, before every torch-using target (they reuse
# it). GCC accepts it in a unit of another optimisation level (-O1 here, -Og or -O3 there: the
# macros they define are the same); DEBUG and SANITIZE build it with their own flags as everything.
if(PCH)
  # A target needs a source for CMake to compile its precompiled header: an empty one, written into
  # the build directory (file(CONFIGURE) leaves it untouched when it has not changed).
  file(CONFIGURE OUTPUT precompiled.cpp CONTENT "// compiles csrc/precompiled.h (cmake/flags.cmake)\n")
  add_library(${NAME}_precompiled OBJECT ${PROJECT_BINARY_DIR}/precompiled.cpp)
  target_link_libraries(${NAME}_precompiled PRIVATE torch_headers)
  target_precompile_headers(${NAME}_precompiled PRIVATE ${PROJECT_SOURCE_DIR}/csrc/precompiled.h)
  backend_optimise(${NAME}_precompiled ${BACKEND_HOST_LEVEL})
endif()
