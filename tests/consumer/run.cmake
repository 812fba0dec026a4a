# ctest driver for the consumer test: install linea into a fresh prefix, configure and build
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
