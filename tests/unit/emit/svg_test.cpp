#include <gtest/gtest.h>
#include <regex>
#include <sstream>

#include "emit/diff_folded.h"
#include "emit/palette.h"
#include "emit/svg.h"
#include "test_xml.h"

namespace flamebpf::emit {
namespace {

using profile::FrameKind;

std::string render(const std::string& folded,
                   SvgOptions options = {},
                   const DiffOptions* diff = nullptr,
                   const std::string& before = "")
{
  FlameTree tree;
  if (diff)
    tree.add_folded(FileContent(before), kBefore);
  tree.add_folded(FileContent(folded), kAfter);
  std::ostringstream out;
  auto written = write_svg(tree, options, out, diff);
  EXPECT_TRUE(written.has_value()) << written.error().message;
  return out.str();
}

// The attributes of the frame named name (its data-n), or "" if it is not drawn.
std::string frame_of(const std::string& svg, const std::string& escaped_name)
{
  auto at = svg.find("data-n=\"" + escaped_name + "\"");
  if (at == std::string::npos)
    return "";
  auto start = svg.rfind("<g class=\"f ", at);
  return svg.substr(start, svg.find("</g>", at) - start);
}

// The fill of a frame's palette class (its "c<N>"), from the SVG's style.
std::string fill_of(const std::string& svg, const std::string& frame)
{
  std::smatch swatch;
  if (!std::regex_search(frame, swatch, std::regex("^<g class=\"f (c[0-9]+)\"")))
    return "";
  std::smatch rule;
  if (!std::regex_search(svg, rule,
                         std::regex("\\." + swatch[1].str() + "\\{fill:(#[0-9a-f]{6})\\}")))
    return "";
  return rule[1];
}

TEST(Svg, WellFormedWithEveryPart)
{
  std::string svg = render("java;main;run_[j];work_[i] 5\njava;main;read_[k] 3\nsh;[unknown] 2\n",
                           SvgOptions{"My title", "target web", 1200, false, 0.1, false});
  EXPECT_EQ(flamebpf::testing::xml_problems(svg), "");
  EXPECT_NE(svg.find("<text id=\"title\" x=\"600\" y=\"24\">My title</text>"), std::string::npos);
  EXPECT_NE(svg.find(">target web</text>"), std::string::npos);
  EXPECT_NE(svg.find("data-total=\"10\""), std::string::npos);
  EXPECT_NE(svg.find("<script type=\"text/ecmascript\"><![CDATA["), std::string::npos);
  // Nothing is fetched: the only addresses are XML namespace names.
  std::regex address("https?://(?!www\\.w3\\.org/)");
  EXPECT_FALSE(std::regex_search(svg, address)) << "a network resource";
  auto run = frame_of(svg, "run");
  EXPECT_NE(run.find("data-w=\"5\""), std::string::npos) << run;
  // 3 samples from the left of 10 in 1180 pixels; depth 3 of 4, in a graph 166 pixels high, 16 a
  // level and 26 below the frames: y = 166 - 26 - 4 * 16.
  EXPECT_NE(run.find("<rect x=\"364\" y=\"76\" width=\"590\" height=\"15\"/>"), std::string::npos)
      << run;
  EXPECT_NE(run.find("<text x=\"367\" y=\"86.5\">run</text>"), std::string::npos) << run;
  // JIT green from the palette; the tooltip is the script's, made from the counts.
  EXPECT_EQ(fill_of(svg, run), css_colour(frame_colour("run", FrameKind::kJit))) << run;
  EXPECT_EQ(run.find("<title>"), std::string::npos) << run;
}

TEST(Svg, HostileNamesStayText)
{
  std::string hostile = "</text><script>alert(1)</script>";
  std::string svg = render("p;" + hostile +
                           " 4\np;java.util.Map<K,V>.get 2\n"
                           "p;a&b\"c'd 1\np;std::vector<int, std::allocator<int> >::push_back 1\n"
                           "p;Foo$$Lambda$14/0x0000000800c03000.apply_[j] 1\n"
                           "p;bad\x01\xff\xfe utf8 1\n");
  EXPECT_EQ(flamebpf::testing::xml_problems(svg), "");
  EXPECT_EQ(svg.find("<script>alert"), std::string::npos);
  EXPECT_NE(svg.find("&lt;/text&gt;&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(svg.find("a&amp;b&quot;c&apos;d"), std::string::npos);
  EXPECT_NE(svg.find("java.util.Map&lt;K,V&gt;.get"), std::string::npos);
  EXPECT_NE(svg.find("bad\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD utf8"), std::string::npos);
  // Only the embedded script is a script element.
  size_t scripts = 0;
  for (size_t at = svg.find("<script"); at != std::string::npos; at = svg.find("<script", at + 1))
    ++scripts;
  EXPECT_EQ(scripts, 1u);
}

TEST(Svg, LongNamesAreCutInTheDrawingAndCappedInTheTooltip)
{
  std::string huge(1 << 20, 'x');
  std::string svg = render("p;" + huge + " 1\n");
  EXPECT_EQ(flamebpf::testing::xml_problems(svg), "");
  EXPECT_LT(svg.size(), 64u * 1024);
  EXPECT_NE(svg.find("xx..</text>"), std::string::npos);
}

TEST(FrameLabel, FitsTheWidthOnCharacterBoundaries)
{
  EXPECT_EQ(frame_label("main", 200), "main");
  EXPECT_EQ(frame_label("main", 10), "");
  EXPECT_EQ(frame_label("abcdefghijklmnop", 6 + 0.59 * 12 * 8), "abcdef..");
  // Two-byte characters are never split.
  EXPECT_EQ(frame_label("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 6 + 0.59 * 12 * 5),
            "\xC3\xA9\xC3\xA9\xC3\xA9..");
}

TEST(XmlText, EscapesReplacesAndCaps)
{
  EXPECT_EQ(xml_text("<a&b>"), "&lt;a&amp;b&gt;");
  EXPECT_EQ(xml_text(std::string("a\0b", 3)), "a\xEF\xBF\xBD"
                                              "b");
  EXPECT_EQ(xml_text("tab\there"), "tab here");
  EXPECT_EQ(xml_text("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                 // overlong '/'
  EXPECT_EQ(xml_text("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // a surrogate
  EXPECT_EQ(xml_text("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(xml_text("abcdef", 3), "abc\xE2\x80\xA6");
}

TEST(Svg, NarrowFramesAreLeftOutButCountedInTheirParents)
{
  std::string folded = "p;big 1000\n";
  for (int i = 0; i < 50; ++i)
    folded += "p;tiny" + std::to_string(i) + " 1\n";
  SvgOptions two_pixels;
  two_pixels.min_frame_width = 2; // one sample is 1.1 px
  std::string svg = render(folded, two_pixels);
  EXPECT_EQ(frame_of(svg, "tiny3"), "");
  EXPECT_NE(frame_of(svg, "p").find("data-w=\"1050\""), std::string::npos);
  SvgOptions everything;
  everything.min_frame_width = 0;
  EXPECT_NE(frame_of(render(folded, everything), "tiny3"), "");
}

TEST(Svg, InvertedPutsTheRootAtTheTop)
{
  SvgOptions options;
  options.inverted = true;
  std::string svg = render("p;a 1\n", options);
  EXPECT_NE(svg.find("data-inverted=\"1\""), std::string::npos);
  EXPECT_NE(frame_of(svg, "all").find("y=\"60\""), std::string::npos) << frame_of(svg, "all");
  EXPECT_NE(frame_of(svg, "a").find("y=\"92\""), std::string::npos);
}

TEST(Svg, EmptyProfileIsADocumentToo)
{
  std::string svg = render("");
  EXPECT_EQ(flamebpf::testing::xml_problems(svg), "");
  EXPECT_NE(svg.find("data-total=\"0\""), std::string::npos);
}

TEST(Palette, ByKindWithStableHues)
{
  Rgb jit = frame_colour("org.example.Foo.bar", FrameKind::kJit);
  EXPECT_EQ(jit, frame_colour("org.example.Foo.bar", FrameKind::kJit));
  EXPECT_GT(jit.g, jit.r);
  EXPECT_GT(jit.g, jit.b);
  Rgb inlined = frame_colour("x", FrameKind::kInlined);
  EXPECT_GT(inlined.b, inlined.r); // aqua
  Rgb kernel = frame_colour("do_syscall_64", FrameKind::kKernel);
  EXPECT_GT(kernel.r, kernel.g);
  EXPECT_GT(kernel.g, kernel.b); // orange
  Rgb cpp = frame_colour("std::vector<int>::push_back", FrameKind::kNative);
  EXPECT_GT(cpp.g, cpp.b); // yellow: red and green high
  EXPECT_GT(cpp.r, cpp.b);
  Rgb native = frame_colour("memcpy", FrameKind::kNative);
  EXPECT_GT(native.r, native.g); // red
  Rgb interpreted = frame_colour("org.example.Foo.bar", FrameKind::kInterpreted);
  EXPECT_GT(interpreted.g, interpreted.r); // green, as Java
  EXPECT_GT(interpreted.g, interpreted.b);
  EXPECT_NE(interpreted, jit); // but not a compiled method's
  // Different names get different shades of the same hue.
  EXPECT_NE(frame_colour("a", FrameKind::kJit), frame_colour("b", FrameKind::kJit));
}

TEST(Palette, DiffColours)
{
  EXPECT_EQ(diff_colour(0, 10), (Rgb{250, 250, 250}));
  Rgb grew = diff_colour(10, 10);
  EXPECT_EQ(grew.r, 255);
  EXPECT_LT(grew.g, 50);
  Rgb shrank = diff_colour(-10, 10);
  EXPECT_EQ(shrank.b, 255);
  EXPECT_LT(shrank.r, 50);
  // A bigger change is a deeper shade.
  EXPECT_LT(diff_colour(8, 10).g, diff_colour(2, 10).g);
}

TEST(DiffSvg, DrawnOverAfterWithBothCounts)
{
  DiffOptions diff;
  std::string svg = render("p;a 40\np;c 40\n", {}, &diff, "p;a 10\np;b 30\n");
  EXPECT_EQ(flamebpf::testing::xml_problems(svg), "");
  EXPECT_NE(svg.find("data-mode=\"diff\""), std::string::npos);
  auto a = frame_of(svg, "a");
  EXPECT_NE(a.find("data-w=\"40\" data-b=\"10\" data-a=\"40\""), std::string::npos) << a;
  EXPECT_TRUE(fill_of(svg, a).starts_with("#ff")) << a; // grew: red
  EXPECT_EQ(frame_of(svg, "b"), "");                    // not in after's shape
  EXPECT_NE(frame_of(svg, "c").find("data-b=\"0\" data-a=\"40\""), std::string::npos);
  DiffOptions negate;
  negate.shape = kBefore;
  std::string negated = render("p;a 40\np;c 40\n", {}, &negate, "p;a 10\np;b 30\n");
  auto b = frame_of(negated, "b");
  EXPECT_NE(b.find("data-b=\"30\" data-a=\"0\""), std::string::npos) << b;
  EXPECT_NE(b.find("data-w=\"30\""), std::string::npos); // widths from before
  EXPECT_TRUE(fill_of(negated, b).ends_with("ff")) << b; // shrank: blue
}

TEST(DiffFolded, TwoColumnsAndNormalization)
{
  profile::SymbolizedProfile before;
  before.stacks = {{1, "p", "", {{"a", "", FrameKind::kNative}}, 10},
                   {1, "p", "", {{"b", "", FrameKind::kKernel}}, 30}};
  profile::SymbolizedProfile after;
  after.stacks = {{1, "p", "", {{"a", "", FrameKind::kNative}}, 40},
                  {1, "p", "", {{"c", "", FrameKind::kJit}}, 40}};
  std::ostringstream plain;
  ASSERT_TRUE(write_diff_folded(before, after, false, plain).has_value());
  EXPECT_EQ(plain.str(), "p;a 10 40\np;b_[k] 30 0\np;c_[j] 0 40\n");
  std::ostringstream normalized;
  ASSERT_TRUE(write_diff_folded(before, after, true, normalized).has_value());
  // before is scaled by 80 / 40.
  EXPECT_EQ(normalized.str(), "p;a 20 40\np;b_[k] 60 0\np;c_[j] 0 40\n");
  EXPECT_DOUBLE_EQ(normalization_factor(40, 80), 2.0);
  EXPECT_DOUBLE_EQ(normalization_factor(0, 80), 1.0);
}

TEST(SvgEmitter, SubtitleFromTheProfile)
{
  profile::SymbolizedProfile profile;
  profile.frequency_hz = 99;
  profile.start = std::chrono::system_clock::time_point(std::chrono::seconds(1795000000));
  profile.end = profile.start + std::chrono::seconds(60);
  profile.stacks = {{1, "java", "web", {{"main", "", FrameKind::kNative}}, 7}};
  EXPECT_EQ(describe_profile(profile), "target web \xC2\xB7 2026-11-18 11:06:40\xE2\x80\x93"
                                       "11:07:40 UTC \xC2\xB7 99 Hz "
                                       "\xC2\xB7 7 samples");
  std::ostringstream out;
  ASSERT_TRUE(SvgEmitter(SvgOptions{}).write(profile, out).has_value());
  EXPECT_EQ(flamebpf::testing::xml_problems(out.str()), "");
}

} // namespace
} // namespace flamebpf::emit
