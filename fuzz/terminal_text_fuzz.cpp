// Fuzzes the terminal text guards (base/terminal_text.h), which every string
// a peer chose passes through before our terminal. Checks: terminal_safe's
// output holds no control byte and is a fixed point of printable_name;
// TerminalFilter's output holds no OSC/DCS introducer and no C0 control but
// \t \n \r \b and the ESC of the CSIs it keeps, and how the input is split
// does not change it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/terminal_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string safe = yonder::terminal_safe(in);
  for (char c : safe) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) std::abort();
  }
  if (!safe.empty() && !yonder::printable_name(safe)) std::abort();

  yonder::TerminalFilter whole;
  std::string out = whole.feed(in);
  for (size_t i = 0; i < out.size(); ++i) {
    auto u = static_cast<unsigned char>(out[i]);
    if (u == 0x1b && (i + 1 >= out.size() || out[i + 1] != '[')) std::abort();
    if (u < 0x20 && u != 0x1b && u != '\t' && u != '\n' && u != '\r' && u != '\b') std::abort();
    if (u == 0xc2 && i + 1 < out.size() && static_cast<unsigned char>(out[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(out[i + 1]) < 0xa0) {
      std::abort();
    }
  }
  size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  yonder::TerminalFilter split;
  std::string parts = split.feed(in.substr(0, cut));
  parts += split.feed(in.substr(cut));
  if (parts != out) std::abort();
  return 0;
}
