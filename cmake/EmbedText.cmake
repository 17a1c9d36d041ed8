# cmake -DIN=file -DOUT=header.h -DNAME=kSymbol -P EmbedText.cmake
# Writes a header defining `inline constexpr std::string_view NAME` with the
# file's bytes, so a binary carries a script it runs (weft demo embeds
# scripts/netns-fabric.sh: an installed weft needs no source tree).
file(READ "${IN}" text)
if(text MATCHES "\\)WEFT_EMBED\"")
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )WEFT_EMBED\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/EmbedText.cmake; do not edit.\n#pragma once\n#include <string_view>\n"
  "inline constexpr std::string_view ${NAME} = R\"WEFT_EMBED(${text})WEFT_EMBED\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
