#include "base/terminal_text.h"

#include <gtest/gtest.h>

#include <string>

namespace yonder {
namespace {

// The clipboard write and screen clear a hostile provider put in its name.
const std::string kEvilName = "ev\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[2Jil";

TEST(TerminalSafe, AProvidersNameCannotWriteTheClipboardOrClearTheScreen) {
  std::string shown = terminal_safe(kEvilName);
  EXPECT_EQ(shown.find('\x1b'), std::string::npos);
  EXPECT_EQ(shown.find('\x07'), std::string::npos);
  EXPECT_EQ(shown, "ev\\e]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07\\e[2Jil");
  EXPECT_FALSE(printable_name(kEvilName));
}

TEST(TerminalSafe, EscapesC1ControlsInvalidUtf8AndOurOwnEscapeCharacter) {
  EXPECT_EQ(terminal_safe("a\xc2\x9b" "2Jb"), "a\\u009b2Jb");  // C1 CSI in UTF-8
  EXPECT_EQ(terminal_safe("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(terminal_safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(terminal_safe("C:\\x41"), "C:\\\\x41");  // a peer cannot type an escape we would print
  EXPECT_EQ(terminal_safe("tab\there\nline\x7f"), "tab\\x09here\\x0aline\\x7f");
}

TEST(TerminalSafe, PrintableTextIsUnchanged) {
  for (std::string s : {"gpu-box", "Zoë's RTX 4090", "研究室", "a b/c"}) {
    EXPECT_EQ(terminal_safe(s), s);
    EXPECT_TRUE(printable_name(s)) << s;
  }
  EXPECT_FALSE(printable_name(""));
  EXPECT_FALSE(printable_name("a\nb"));
}

TEST(TerminalFilter, AJobsOutputCannotWriteTheClipboardOrChangeTheTitle) {
  TerminalFilter f;
  std::string out = f.feed("loss 0.1\n\x1b]52;c;ZXZpbA==\x07\x1b]0;owned\x1b\\\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n");
  EXPECT_EQ(out, "loss 0.1\nlink\n");
  EXPECT_EQ(f.dropped(), 4u);
}

TEST(TerminalFilter, KeepsColoursAndProgressBarMovesDropsTheRest) {
  TerminalFilter f;
  EXPECT_EQ(f.feed("\x1b[1;31mred\x1b[0m\r\x1b[2K50%\x1b[A"), "\x1b[1;31mred\x1b[0m\r\x1b[2K50%\x1b[A");
  EXPECT_EQ(f.feed("\x1b[2J\x1b[21t\x1b[6n\x1b[?1049h\x1b" "cx"), "x");  // clear, title report, cursor report, alt screen, reset
  EXPECT_EQ(f.feed("\x1bP$q\"p\x1b\\y"), "y");  // DECRQSS
  EXPECT_EQ(f.feed("a\x07" "b\x01" "c"), "abc");
}

TEST(TerminalFilter, ASequenceSplitAcrossChunksIsStillDropped) {
  std::string input = "before\x1b]52;c;ZXZpbA==\x07" "after\x1b[31mred\xc2\x9b" "2J\n";
  TerminalFilter whole;
  std::string expected = whole.feed(input);
  EXPECT_EQ(expected, "before" "after\x1b[31mred" "2J\n");
  for (size_t cut = 1; cut < input.size(); ++cut) {
    TerminalFilter split;
    std::string got = split.feed(input.substr(0, cut));
    got += split.feed(input.substr(cut));
    EXPECT_EQ(got, expected) << "cut at " << cut;
  }
}

TEST(TerminalFilter, AnUnterminatedStringIsBounded) {
  TerminalFilter f;
  std::string out = f.feed("\x1b]52;c;" + std::string(70 * 1024, 'A') + "\n");
  // The string was dropped after 64 KiB; what follows is text again.
  EXPECT_LT(out.size(), 8u * 1024);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(f.feed("ok"), "ok");
}

TEST(TerminalFilter, Utf8TextPassesWhole) {
  TerminalFilter f;
  EXPECT_EQ(f.feed("Zoë \xc2\xa9 研究"), "Zoë \xc2\xa9 研究");
}

}  // namespace
}  // namespace yonder
