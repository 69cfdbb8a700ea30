// Small helpers for the text of settings (BRAID_ALGO, BRAID_TRANSPORT and the like).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace braid {

/// `s` without leading and trailing white space.
inline std::string_view trimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// `s` in lower case (ASCII).
inline std::string lowerCase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace braid
