// Text from a peer (a provider's name, a job's file names, its output) on
// our terminal.
//
// A string a peer chose can hold control sequences that a terminal obeys:
// OSC 52 writes the clipboard, OSC 0/2 change the title, OSC 8 makes
// hyperlinks, CSI 2J clears the screen, and some reports (CSI 21t, DECRQSS)
// type text back into our shell. Two tools, one per use:
//
//   terminal_safe(s)  for a name or a message printed inside our own output:
//                     every C0/C1 control, DEL and invalid UTF-8 byte becomes
//                     a visible escape (\e, \x07, \u009b, \xff); nothing the
//                     peer chose can act on the terminal; a backslash before
//                     x, e or u is doubled, so a peer cannot fake an escape.
//   TerminalFilter    for a job's output stream (`run`, `logs` without -t):
//                     passes text, \t \n \r \b, SGR colours and the cursor
//                     moves progress bars use (CSI A-G, K); drops OSC, DCS,
//                     SOS, PM, APC strings, every other CSI and escape, other
//                     C0 controls and C1 controls. Streaming: a sequence split
//                     across chunks is handled whole. Bounded: a CSI longer
//                     than 64 bytes or a string longer than 64 KiB is dropped
//                     and the filter returns to plain text.
//
// Pure (no I/O). Fuzzed by fuzz/terminal_text_fuzz.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace yonder {

// `keep_lines`: \n and \t pass (a message of several lines); else they are
// escaped too (a name, one table cell).
std::string terminal_safe(std::string_view s, bool keep_lines = false);

// True when `s` is non-empty, valid UTF-8 and holds no control character
// (C0, DEL, C1): what a name a peer shows must be.
bool printable_name(std::string_view s);

class TerminalFilter {
 public:
  // The filtered form of `chunk`, given everything fed before it.
  std::string feed(std::string_view chunk);
  // Sequences dropped so far (for a one-line note).
  uint64_t dropped() const { return dropped_; }

 private:
  enum class State { kText, kEsc, kCsi, kString, kStringEsc, kC2 };
  void drop();
  void text_byte(char ch, std::string& out);
  State state_ = State::kText;
  std::string csi_;     // the CSI being collected, from ESC [
  size_t string_len_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace yonder
