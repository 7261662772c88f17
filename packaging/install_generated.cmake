# Run by `cmake --install` (install(CODE) in packaging/CMakeLists.txt): the files that depend on
# the prefix given at install time (`--prefix`, CPack's /usr), not the one configured.
#   MRC_STEP=pc      mrc.pc into <libdir>/pkgconfig (inputs: MRC_PC_IN, MRC_PC_LIBDIR,
#                    MRC_PC_INCLUDEDIR, MRC_PC_VERSION, MRC_WORK)
#   MRC_STEP=config  the example mrc.json.example: /etc/mrc for the prefixes / and /usr (where
#                    libmrc reads mrc.json), else <prefix>/etc/mrc (inputs: MRC_CONFIG_IN)
#   MRC_STEP=man     a man page per tool from its --help (help2man), gzipped, into <mandir>/man1
#                    (inputs: MRC_HELP2MAN, MRC_MANDIR, MRC_VERSION, MRC_TOOLS: "path|summary;...")
# DESTDIR is honoured by file(INSTALL).
if(MRC_STEP STREQUAL "pc")
  set(MRC_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  configure_file("${MRC_PC_IN}" "${MRC_WORK}/mrc.pc" @ONLY)
  file(INSTALL "${MRC_WORK}/mrc.pc" DESTINATION "${CMAKE_INSTALL_PREFIX}/${MRC_PC_LIBDIR}/pkgconfig")
elseif(MRC_STEP STREQUAL "config")
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR CMAKE_INSTALL_PREFIX STREQUAL "/")
    set(dir "/etc/mrc")
  else()
    set(dir "${CMAKE_INSTALL_PREFIX}/etc/mrc")
  endif()
  file(INSTALL "${MRC_CONFIG_IN}" DESTINATION "${dir}")
elseif(MRC_STEP STREQUAL "man")
  if(NOT MRC_HELP2MAN)
    message(FATAL_ERROR "man pages: help2man not found (Debian: apt install help2man, "
                        "or bash scripts/deps.sh); configure again after installing it")
  endif()
  file(MAKE_DIRECTORY "${MRC_WORK}")
  set(pages "")
  foreach(tool IN LISTS MRC_TOOLS)
    string(REPLACE "|" ";" tool "${tool}")
    list(GET tool 0 exe)
    list(GET tool 1 summary)
    get_filename_component(name "${exe}" NAME)
    execute_process(
      COMMAND "${MRC_HELP2MAN}" --no-info --no-discard-stderr "--version-string=${MRC_VERSION}"
              "--name=${summary}" --section=1 --source=mrc "--output=${MRC_WORK}/${name}.1" "${exe}"
      RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "man page of ${name}: help2man ${exe} failed (${rc}): ${err}")
    endif()
    # Compressed as Debian installs man pages (gzip -9n: no name or time in the header).
    execute_process(COMMAND gzip -9nf "${MRC_WORK}/${name}.1" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "man page of ${name}: gzip failed (${rc})")
    endif()
    list(APPEND pages "${MRC_WORK}/${name}.1.gz")
  endforeach()
  file(INSTALL ${pages} DESTINATION "${CMAKE_INSTALL_PREFIX}/${MRC_MANDIR}/man1")
else()
  message(FATAL_ERROR "install_generated.cmake: unknown MRC_STEP '${MRC_STEP}'")
endif()
