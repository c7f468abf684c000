# The installed torch, as three interface targets built from the paths setup.py passes
# (torch.utils.cpp_extension.include_paths() and library_paths(), the same torch cpp_extension
# builds against):
#   torch_headers   torch's and Python's headers and the definitions every extension of torch has
#   torch_libraries c10, torch, torch_cpu (the layers that call ATen)
#   torch_python    torch's Python bindings, for the module (pybind11's headers ship with torch)

add_library(torch_headers INTERFACE)
target_include_directories(torch_headers SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS} ${PYTHON_INCLUDE_DIR})
target_compile_definitions(torch_headers INTERFACE TORCH_API_INCLUDE_EXTENSION_H TORCH_EXTENSION_NAME=_C)

function(find_torch_library variable name)
  find_library(${variable} ${name} PATHS ${TORCH_LIBRARY_DIRS} NO_DEFAULT_PATH REQUIRED)
endfunction()
find_torch_library(TORCH_C10 c10)
find_torch_library(TORCH_TORCH torch)
find_torch_library(TORCH_CPU torch_cpu)
find_torch_library(TORCH_PYTHON torch_python)

add_library(torch_libraries INTERFACE)
target_link_libraries(torch_libraries INTERFACE torch_headers ${TORCH_C10} ${TORCH_TORCH} ${TORCH_CPU})

add_library(torch_python INTERFACE)
target_link_libraries(torch_python INTERFACE torch_libraries ${TORCH_PYTHON})
