# ctest driver for the consumer test: install linea into a fresh prefix, check that the prefix
# holds only the public headers and no machine-specific compile flag, configure and build
# tests/consumer against it, run it, and check that it loads the OpenBLAS linea was built with.
# Called as: cmake -DLINEA_BUILD=... -DCONSUMER_SRC=... -DWORK=... -DOPENBLAS=... -P run.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "consumer test: `${cmd}` failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${LINEA_BUILD} --prefix ${prefix})

# Only the API is installed: every installed header is <linea/linea.h>, <linea/tensor/backend.h>
# or reached from them (cmake/public_headers.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/public_headers.cmake)
set(inc ${prefix}/include/linea)
linea_public_headers(${inc} public)
file(GLOB_RECURSE installed RELATIVE ${inc} ${inc}/*)
set(private ${installed})
list(REMOVE_ITEM private ${public})
if(private)
  message(FATAL_ERROR "consumer test: private headers installed (not reached from linea.h or tensor/backend.h): ${private}")
endif()
list(LENGTH installed n)
message(STATUS "consumer: ${n} public headers installed, none private")
# The package's interface must not carry a flag for the build machine's CPU.
file(GLOB exported ${prefix}/lib*/cmake/linea/*.cmake)
foreach(f IN LISTS exported)
  file(STRINGS ${f} bad REGEX "march|mtune")
  if(bad)
    message(FATAL_ERROR "consumer test: ${f} exports a machine-specific flag: ${bad}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${WORK}/build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_CXX_COMPILER=${CXX})
run(${CMAKE_COMMAND} --build ${WORK}/build)
run(${WORK}/build/consumer)
message(STATUS "${out}")

# Debian's default libopenblas.so.0 may be the pthread build; the binary must find the one
# linea links by path (through its RPATH), or BLAS and OpenMP would fight over the cores.
find_program(LDD ldd)
if(LDD)
  run(${LDD} ${WORK}/build/consumer)
  get_filename_component(blas_dir ${OPENBLAS} DIRECTORY)
  string(REGEX MATCH "libopenblas[^\n]*=> ([^ ]*)" line "${out}")
  if(NOT line OR NOT CMAKE_MATCH_1 MATCHES "^${blas_dir}/")
    message(FATAL_ERROR "consumer test: loads ${CMAKE_MATCH_1}, expected the OpenBLAS in ${blas_dir}:\n${out}")
  endif()
  message(STATUS "consumer loads: ${line}")
endif()
