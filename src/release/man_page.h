// A man page (roff, man(7) macros) generated from a CommandDoc: NAME,
// SYNOPSIS, DESCRIPTION, OPTIONS, then one COMMANDS entry per subcommand
// path with its arguments and options, then any extra sections the program
// adds (FILES, ENVIRONMENT...). No date in the header, so the page of a given
// version is byte-for-byte reproducible.
#pragma once

#include <string>
#include <vector>

#include "release/cli_doc.h"

namespace yonder::release {

struct ManSection {
  std::string title;  // "FILES"
  std::string text;   // plain text; blank lines start new paragraphs
};

struct ManPageInfo {
  int section = 1;                    // 1: user commands, 8: system administration
  std::string version;                // footer, e.g. "yonder 0.1.0 (git abc123)"
  std::string summary;                // NAME line after the dash
  std::vector<ManSection> extra;      // after COMMANDS
  std::vector<std::string> see_also;  // "yonderd(8)"
};

std::string man_page(const CommandDoc& root, const ManPageInfo& info);

// Escapes plain text for roff: backslashes, and a leading '.' or '\''.
std::string roff_escape(const std::string& text);

}  // namespace yonder::release
