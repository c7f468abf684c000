# The emulated device's math library (the native_operators answer), included by ../CMakeLists.txt:
# host_math.cpp borrows ATen's CPU operators for the dense math, and it alone of the operator
# library sees torch's headers.
set_source_files_properties(emulated/host_math.cpp PROPERTIES
  INCLUDE_DIRECTORIES "$<TARGET_PROPERTY:torch_headers,INTERFACE_INCLUDE_DIRECTORIES>"
  COMPILE_DEFINITIONS "$<TARGET_PROPERTY:torch_headers,INTERFACE_COMPILE_DEFINITIONS>")
