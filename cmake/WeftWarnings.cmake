# Warning and sanitizer flags for weft's own targets (never for dependencies).
add_library(weft_flags INTERFACE)
target_compile_options(weft_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough
  $<$<BOOL:${WEFT_WERROR}>:-Werror>
  # GCC 12 at -O2/-O3 reports impossible memcpy overlaps inside std::string
  # concatenation (GCC bug 105329); keep it a warning, not an error.
  $<$<CXX_COMPILER_ID:GNU>:-Wno-error=restrict>)
# Sanitizers apply to everything built here (tests, tools), so set them
# globally rather than through weft_flags.
if(WEFT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # Executables without PIE: a sanitized PIE carries a dynamic relocation
  # for every check site's source record and every global's descriptor
  # (millions in the weft binary), which the loader applies, page by page,
  # at every start, and the tests start weft and their own programs many
  # times. Non-PIE resolves them at link time (ld(1) -no-pie).
  add_link_options($<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>)
endif()

# weft_library(NAME SOURCES... DEPS ...): one library per stage folder,
# exported as weft::NAME, headers under <folder>/weft/NAME/.
function(weft_library name)
  cmake_parse_arguments(W "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(weft_${name} ${W_SOURCES})
  add_library(weft::${name} ALIAS weft_${name})
  target_include_directories(weft_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(weft_${name} PUBLIC ${W_DEPS} PRIVATE weft_flags ${W_PRIVATE_DEPS})
  set_target_properties(weft_${name} PROPERTIES OUTPUT_NAME weft_${name}
    POSITION_INDEPENDENT_CODE ON)
endfunction()
# libFuzzer builds: coverage instrumentation plus ASan/UBSan for everything
# compiled here; the fuzz targets add -fsanitize=fuzzer at link time.
if(WEFT_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
