# The public headers: <linea/linea.h>, the user API; <linea/dist/dist.h> and
# <linea/dist/data_parallel.h>, the API of linea::dist (a library of its own, above nn/);
# <linea/models/vit.h> and <linea/models/gpt.h>, the models of linea::models (above dist/);
# <linea/tensor/json.h>, the JSON reader and writer of linea's file formats; and
# <linea/tensor/backend.h>, the kernel interface (for those who write a backend or call kernels
# directly; linea.h does not include it, so `using namespace linea` brings in neither Backend nor
# the op-table macros); with every linea header they include, directly or through another public
# header. Everything else (kernel
# headers, the CPU backend's internals, mhla_detail.h, the CUDA backend's classes) is private and
# is not installed.
#
# linea_public_headers(ROOT OUT): ROOT is the folder that "linea/" stands for (the source tree,
# or include/linea of an installed tree); OUT gets the headers' paths relative to ROOT, sorted.
# Used by the install rules (CMakeLists.txt) and by the consumer test, which checks that the
# installed tree holds exactly these.
function(linea_public_headers root out)
  set(todo linea.h dist/dist.h dist/data_parallel.h models/vit.h models/gpt.h tensor/json.h tensor/backend.h)
  set(seen)
  while(todo)
    list(POP_FRONT todo h)
    list(FIND seen ${h} at)  # (not IN_LIST: this also runs in cmake -P scripts, under old policies)
    if(at GREATER -1)
      continue()
    endif()
    if(NOT EXISTS ${root}/${h})
      message(FATAL_ERROR "public header linea/${h} is included but missing under ${root}")
    endif()
    list(APPEND seen ${h})
    file(STRINGS ${root}/${h} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]linea/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]linea/([^>\"]+)[>\"].*" "\\1" inc "${line}")
      list(APPEND todo ${inc})
    endforeach()
  endwhile()
  list(SORT seen)
  set(${out} ${seen} PARENT_SCOPE)
endfunction()
