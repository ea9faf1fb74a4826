# Unity (jumbo) compiles, PROFCTL_UNITY_BUILD (cmake/ProfctlOptions.cmake): each target's C++
# sources compiled in batches of up to PROFCTL_UNITY_BATCH_SIZE per translation unit.
#
# The batch files are written here rather than by CMake's own UNITY_BUILD: CMake 3.25 (Debian 12)
# #includes each source by its absolute path, so the same commit cloned at another path has other
# batch files and misses ccache's direct mode on every batch (a warm build of a fresh clone took
# 277 s instead of 117 s; docs/ci.md). Here a batch names each source relative to the batch file,
# which sits in the build folder: a clone at any path, built into the same relative build folder,
# has byte-identical batch files. (CMake >= 3.32 offers the same as UNITY_BUILD_RELOCATABLE.)
#
# A target keeps its sources (marked HEADER_FILE_ONLY, so they still show up and a generated one
# is still generated before the batch compiles) and gains the batch files,
# BINARY_DIR/unity/TARGET_N.cc. A target with the property PROFCTL_UNITY set to OFF compiles file
# by file (protoc's sources). scripts/unity_compdb.py reads the batches back for clang-tidy.

if(NOT DEFINED PROFCTL_UNITY_BATCH_SIZE)
  set(PROFCTL_UNITY_BATCH_SIZE 16)
endif()
# The first line of every batch file: how scripts/unity_compdb.py tells a batch from a source.
set(PROFCTL_UNITY_MARKER "// profctl unity batch")

# out = every target defined in `dir` and the folders below it.
function(_profctl_targets_in dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _profctl_targets_in(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# out = the absolute paths of `target`'s C++ sources a batch may hold, in the target's order.
function(_profctl_unity_sources target out)
  get_target_property(srcs ${target} SOURCES)
  get_target_property(src_dir ${target} SOURCE_DIR)
  set(result)
  foreach(s IN LISTS srcs)
    if(s MATCHES "\\$<" OR NOT s MATCHES "\\.(cc|cpp|cxx)$")
      continue()
    endif()
    get_filename_component(abs ${s} ABSOLUTE BASE_DIR ${src_dir})
    # A source with flags of its own compiles on its own, as CMake's unity build does.
    set(skip FALSE)
    foreach(property SKIP_UNITY_BUILD_INCLUSION COMPILE_DEFINITIONS COMPILE_OPTIONS COMPILE_FLAGS
                     INCLUDE_DIRECTORIES)
      get_source_file_property(value ${abs} TARGET_DIRECTORY ${target} ${property})
      if(value)
        set(skip TRUE)
      endif()
    endforeach()
    if(NOT skip)
      list(APPEND result ${abs})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES result)
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# Writes `content` to `path` only when it differs (an unchanged batch is not compiled again).
function(_profctl_write_batch path content)
  if(EXISTS ${path})
    file(READ ${path} old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE ${path}.tmp "${content}")
  file(RENAME ${path}.tmp ${path})
endfunction()

# Called once, after every folder defined its targets.
function(profctl_unity_batches)
  if(NOT PROFCTL_UNITY_BUILD)
    return()
  endif()
  _profctl_targets_in(${PROJECT_SOURCE_DIR} targets)
  # A source file's HEADER_FILE_ONLY is per folder, not per target: a source batched for one
  # target would vanish from another target of the same folder that compiles it on its own.
  set(batched)
  set(apart)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC|SHARED|MODULE|OBJECT)_LIBRARY$" AND NOT type STREQUAL EXECUTABLE)
      continue()
    endif()
    _profctl_unity_sources(${t} sources)
    if(NOT sources)
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    get_target_property(unity ${t} PROFCTL_UNITY)
    if(NOT unity AND NOT unity MATCHES "NOTFOUND$")
      foreach(s IN LISTS sources)
        list(APPEND apart "${dir}|${s}")
      endforeach()
      continue()
    endif()
    foreach(s IN LISTS sources)
      list(APPEND batched "${dir}|${s}")
    endforeach()
    get_target_property(bin_dir ${t} BINARY_DIR)
    set(batch_dir ${bin_dir}/unity)
    file(REAL_PATH ${bin_dir} bin_real_dir)
    set(batch_real_dir ${bin_real_dir}/unity)
    set(batch_files)
    set(n 0)
    set(content "")
    foreach(s IN LISTS sources)
      if(content STREQUAL "")
        set(content "${PROFCTL_UNITY_MARKER} of ${t} (cmake/ProfctlUnity.cmake)\n")
      endif()
      # Relative between real paths: the compiler resolves ".." physically, so a build folder
      # reached through a symbolic link needs the path from where the batch really is.
      get_filename_component(s_dir ${s} DIRECTORY)
      get_filename_component(s_name ${s} NAME)
      file(REAL_PATH ${s_dir} s_real_dir)
      file(RELATIVE_PATH rel ${batch_real_dir} ${s_real_dir}/${s_name})
      string(APPEND content "#include \"${rel}\"\n")
      math(EXPR n "${n} + 1")
      if(n EQUAL PROFCTL_UNITY_BATCH_SIZE)
        list(LENGTH batch_files i)
        _profctl_write_batch(${batch_dir}/${t}_${i}.cc "${content}")
        list(APPEND batch_files ${batch_dir}/${t}_${i}.cc)
        set(n 0)
        set(content "")
      endif()
    endforeach()
    if(NOT content STREQUAL "")
      list(LENGTH batch_files i)
      _profctl_write_batch(${batch_dir}/${t}_${i}.cc "${content}")
      list(APPEND batch_files ${batch_dir}/${t}_${i}.cc)
    endif()
    set_source_files_properties(${sources} TARGET_DIRECTORY ${t} PROPERTIES HEADER_FILE_ONLY ON)
    target_sources(${t} PRIVATE ${batch_files})
  endforeach()
  foreach(entry IN LISTS apart)
    if(entry IN_LIST batched)
      string(REGEX REPLACE "^[^|]*[|]" "" source "${entry}")
      message(FATAL_ERROR "PROFCTL_UNITY_BUILD: ${source} is compiled both in a batch and on its "
                          "own by targets of one folder (a source's HEADER_FILE_ONLY is per "
                          "folder; cmake/ProfctlUnity.cmake)")
    endif()
  endforeach()
endfunction()
