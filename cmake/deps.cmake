# Dependencies come through pkg-config. A missing one stops configure and names the Debian
# package that provides it, so a newcomer knows what to install (tools/install-deps does it all).
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: install the Debian package 'pkg-config' (or run tools/install-deps)")
endif()

function(zlfs_require_pkg prefix module debpkg)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "missing dependency '${module}': install the Debian package '${debpkg}' "
                        "(apt-get install ${debpkg}), or run tools/install-deps")
  endif()
  message(STATUS "found ${module} ${${prefix}_VERSION}")
endfunction()
