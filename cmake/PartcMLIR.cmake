# Finds Debian's LLVM/MLIR 22 and links it statically into our tools, so that
# partc and partc-opt run on machines without LLVM installed.
find_package(MLIR REQUIRED CONFIG
  HINTS /usr/lib/llvm-22/lib/cmake/mlir)
message(STATUS "Using MLIRConfig.cmake in: ${MLIR_DIR}")

list(APPEND CMAKE_MODULE_PATH ${MLIR_CMAKE_DIR} ${LLVM_CMAKE_DIR})
set(LLVM_RUNTIME_OUTPUT_INTDIR ${PARTC_BINARY_DIR})
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)

separate_arguments(PARTC_LLVM_DEFS NATIVE_COMMAND ${LLVM_DEFINITIONS})

# Debian's static MLIR archives name libLLVM.so in their link interface;
# replace it with static LLVM components.
set(LLVM_LINK_LLVM_DYLIB OFF)
if(NOT TARGET zstd::libzstd_shared)
  add_library(zstd::libzstd_shared SHARED IMPORTED)
  set_target_properties(zstd::libzstd_shared PROPERTIES
    IMPORTED_LOCATION /usr/lib/x86_64-linux-gnu/libzstd.so.1)
endif()
llvm_map_components_to_libnames(PARTC_LLVM_STATIC_LIBS
  Support Core Remarks BitstreamReader BinaryFormat TargetParser Demangle)
add_library(partc_llvm_static INTERFACE)
target_link_libraries(partc_llvm_static INTERFACE ${PARTC_LLVM_STATIC_LIBS})
get_property(PARTC_MLIR_LIBS GLOBAL PROPERTY MLIR_ALL_LIBS)
foreach(lib IN LISTS PARTC_MLIR_LIBS)
  if(TARGET ${lib})
    get_target_property(iface ${lib} INTERFACE_LINK_LIBRARIES)
    if(iface)
      list(TRANSFORM iface REPLACE "^LLVM$" "partc_llvm_static")
      set_target_properties(${lib} PROPERTIES INTERFACE_LINK_LIBRARIES "${iface}")
    endif()
  endif()
endforeach()

# Applies MLIR's include paths and definitions to one target only, so that the
# runtime (configured in the same project) never sees them.
function(partc_use_mlir target)
  target_include_directories(${target} SYSTEM PUBLIC
    ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  target_include_directories(${target} PUBLIC
    ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_definitions(${target} PUBLIC ${PARTC_LLVM_DEFS})
  if(NOT LLVM_ENABLE_RTTI)
    target_compile_options(${target} PUBLIC -fno-rtti)
  endif()
endfunction()
