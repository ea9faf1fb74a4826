# The two rules both sides of the layering check apply: profctl_check_layering() at configure
# time (links, cmake/ProfctlTargets.cmake) and cmake/CheckIncludes.cmake at build time (includes).
include_guard(GLOBAL)

# out = the entry of `layers` whose rules cover `folder`: the longest one it is in or equal to;
# "" when none does.
function(profctl_layer_of layers folder out)
  set(best "")
  foreach(l IN LISTS layers)
    string(LENGTH "${l}" n)
    string(LENGTH "${best}" bn)
    if((folder STREQUAL l OR folder MATCHES "^${l}/") AND n GREATER bn)
      set(best ${l})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# out = whether code allowed `allowed` (folders, or "*" for anything) may use `used` (a folder):
# a folder's rules cover the folders under it that have no entry of their own.
function(profctl_may_use layers allowed used out)
  if(allowed STREQUAL "*")
    set(${out} TRUE PARENT_SCOPE)
    return()
  endif()
  profctl_layer_of("${layers}" ${used} used_layer)
  if(used IN_LIST allowed OR (NOT used_layer STREQUAL "" AND used_layer IN_LIST allowed))
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()
