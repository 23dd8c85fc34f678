#include "base/terminal_text.h"


namespace yonder {
namespace {

constexpr size_t kMaxCsi = 64;
constexpr size_t kMaxString = 64 * 1024;

// The length of the valid UTF-8 sequence at s[i], or 0 when it is not one
// (overlong forms, surrogates and values past U+10FFFF are not).
size_t utf8_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// \xNN (width 2) or \uNNNN (width 4).
void hex_escape(std::string& out, char kind, unsigned value) {
  static const char kDigits[] = "0123456789abcdef";
  int width = kind == 'u' ? 4 : 2;
  out += '\\';
  out += kind;
  for (int shift = (width - 1) * 4; shift >= 0; shift -= 4) out += kDigits[(value >> shift) & 0xf];
}

}  // namespace

std::string terminal_safe(std::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = utf8_length(s, i);
    if (n == 0) {
      hex_escape(out, 'x', c);
      ++i;
    } else if (n == 1 && c == 0x1b) {
      out += "\\e";
      ++i;
    } else if (n == 1 && keep_lines && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
      ++i;
    } else if (n == 1 && (c < 0x20 || c == 0x7f)) {
      hex_escape(out, 'x', c);
      ++i;
    } else if (n == 1 && c == '\\' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'e' || s[i + 1] == 'u')) {
      out += "\\\\";  // so an escape we print cannot be confused with one the peer typed
      ++i;
    } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {
      hex_escape(out, 'u', static_cast<unsigned char>(s[i + 1]));  // C1 controls
      i += 2;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

bool printable_name(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = utf8_length(s, i);
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7f))) return false;
    if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) return false;
    i += n;
  }
  return true;
}

void TerminalFilter::drop() {
  ++dropped_;
  csi_.clear();
  string_len_ = 0;
  state_ = State::kText;
}

void TerminalFilter::text_byte(char ch, std::string& out) {
  auto c = static_cast<unsigned char>(ch);
  if (c == 0x1b) {
    state_ = State::kEsc;
  } else if (c == 0xc2) {
    state_ = State::kC2;  // maybe a C1 control: decided by the next byte
  } else if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\b') || c == 0x7f) {
    ++dropped_;
  } else {
    out += ch;
  }
}

std::string TerminalFilter::feed(std::string_view chunk) {
  std::string out;
  out.reserve(chunk.size());
  for (char ch : chunk) {
    auto c = static_cast<unsigned char>(ch);
    switch (state_) {
      case State::kText:
        text_byte(ch, out);
        break;
      case State::kC2:
        state_ = State::kText;
        if (c >= 0x80 && c < 0xa0) {
          // C1: 0x9b is CSI, 0x9d OSC, 0x90 DCS, ...: the string ones are
          // skipped like their ESC forms, the rest dropped.
          if (c == 0x9d || c == 0x90 || c == 0x98 || c == 0x9e || c == 0x9f) {
            state_ = State::kString;
            string_len_ = 0;
          } else {
            ++dropped_;
          }
        } else if (c >= 0xa0 && c <= 0xbf) {
          out += '\xc2';  // U+00A0..U+00BF: text
          out += ch;
        } else {
          ++dropped_;  // a lone 0xc2 (invalid UTF-8) goes, lest it pair with a later byte
          text_byte(ch, out);
        }
        break;
      case State::kEsc:
        if (c == '[') {
          state_ = State::kCsi;
          csi_ = "\x1b[";
        } else if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
          state_ = State::kString;
          string_len_ = 0;
        } else {
          drop();  // any other escape (ESC c resets the terminal, ...)
        }
        break;
      case State::kCsi:
        csi_ += ch;
        if (c >= 0x40 && c <= 0x7e) {  // the final byte
          bool params_ok = true;
          for (size_t k = 2; k + 1 < csi_.size(); ++k) {
            char p = csi_[k];
            if (!((p >= '0' && p <= '9') || p == ';')) params_ok = false;  // no private modes (?, >, =)
          }
          bool allowed = c == 'm' || c == 'K' || (c >= 'A' && c <= 'G');
          if (params_ok && allowed) {
            out += csi_;
            csi_.clear();
            state_ = State::kText;
          } else {
            drop();
          }
        } else if (c < 0x20 || c > 0x7e || csi_.size() > kMaxCsi) {
          drop();
        }
        break;
      case State::kString:
        if (c == 0x07 || c == 0x9c) {
          drop();
        } else if (c == 0x1b) {
          state_ = State::kStringEsc;
        } else if (++string_len_ > kMaxString) {
          drop();
        }
        break;
      case State::kStringEsc:
        if (c == '\\') {
          drop();
        } else {
          state_ = State::kString;
          if (++string_len_ > kMaxString) drop();
        }
        break;
    }
  }
  return out;
}

}  // namespace yonder
