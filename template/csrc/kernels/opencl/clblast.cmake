# CLBlast, the BLAS of the OpenCL operator library's products and convolutions (blas.cpp; the
# native_operators answer), included by ../CMakeLists.txt.
find_package(CLBlast QUIET)
if(NOT CLBlast_FOUND)
  message(FATAL_ERROR "The OpenCL operator library's matrix products need CLBlast, which CMake did not find: "
    "install it (Debian and Ubuntu: apt-get install libclblast-dev) or set CLBlast_DIR to its CMake package.")
endif()
target_link_libraries(${NAME}_kernels PRIVATE clblast)
