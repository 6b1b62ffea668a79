# Injected into every interface package that scripts/build_interface.sh builds (CMAKE_PROJECT_INCLUDE), so that
# no package's CMakeLists.txt needs to carry it (interfaces/vision_msgs, ../shared/ros2_launch/composition_interfaces).
#
# The PyPI message wheels export their *__rosidl_generator_py targets with include directories of the interpreter
# they were built with (/opt/python/cp3XX-.../include), which do not exist here; CMake then refuses to use them
# ("Imported target ... includes non-existent path"). At the end of the top directory (after every find_package),
# point those targets at this interpreter's Python and NumPy headers instead. Only targets whose include
# directories are missing are touched, so a normal ROS install is left alone. See ../shared/ENVIRONMENT.md.
function(_vrt_fix_rosidl_py_includes)
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development NumPy)
  get_directory_property(_vrt_imported_targets DIRECTORY "${CMAKE_SOURCE_DIR}" IMPORTED_TARGETS)
  foreach(_target IN LISTS _vrt_imported_targets)
    if(_target MATCHES "__rosidl_generator_py$")
      get_target_property(_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
      set(_missing FALSE)
      foreach(_dir IN LISTS _dirs)
        if(_dir AND NOT IS_DIRECTORY "${_dir}")
          set(_missing TRUE)
        endif()
      endforeach()
      if(_missing)
        set_target_properties(${_target} PROPERTIES
          INTERFACE_INCLUDE_DIRECTORIES "${Python3_INCLUDE_DIRS};${Python3_NumPy_INCLUDE_DIRS}")
      endif()
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _vrt_fix_rosidl_py_includes)
