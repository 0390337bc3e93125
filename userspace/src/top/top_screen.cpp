#include "top/top_screen.h"

#include <algorithm>
#include <clocale>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <langinfo.h>
#include <map>
#include <ncurses.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/capabilities.h"
#include "emit/palette.h"

namespace flamebpf::top {
namespace {

constexpr int kKeyEscape = 27;
constexpr size_t kMaxHeldIntervals = 3600; // an hour of 1 s intervals while paused
constexpr size_t kMaxTreeLines = 2000;

std::string_view window_name(TopWindow window)
{
  return window == TopWindow::kInterval   ? "last interval"
         : window == TopWindow::kDecaying ? "decaying average"
                                          : "since start";
}

// The colour pair of a frame colour: the nearest of xterm's 256 colours, or of the 8 basic ones.
int pair_of(emit::Rgb colour)
{
  static std::map<int, int> pairs;
  if (!has_colors())
    return 0;
  int index = 0;
  if (COLORS >= 256) {
    auto level = [](uint8_t channel) { return static_cast<int>(std::lround(channel / 255.0 * 5)); };
    index = 16 + 36 * level(colour.r) + 6 * level(colour.g) + level(colour.b);
  } else {
    // The brightest channels name the basic colour: red 1, green 2, yellow 3, cyan 6, white 7.
    int red = colour.r > 150;
    int green = colour.g > 150;
    int blue = colour.b > 150;
    index = red | (green << 1) | (blue << 2);
    if (index == 0)
      index = COLOR_WHITE;
  }
  auto it = pairs.find(index);
  if (it != pairs.end())
    return it->second;
  int pair = static_cast<int>(pairs.size()) + 1;
  if (pair >= COLOR_PAIRS)
    return 0;
  init_pair(static_cast<short>(pair), static_cast<short>(index), -1);
  pairs.emplace(index, pair);
  return pair;
}

// Writes text (made terminal-safe by the caller) at row, from column, cut at the screen's edge.
void put(int row, int column, const std::string& text, attr_t attributes = A_NORMAL)
{
  if (row < 0 || row >= LINES || column >= COLS)
    return;
  attron(attributes);
  mvaddnstr(row, column, text.c_str(), -1);
  attroff(attributes);
}

// Moves position (a selected row, or a scroll offset) as a key asks: a line, a page, to an end,
// or three lines a turn of the mouse wheel. last is the end's position.
void move_position(int key, size_t& position, size_t page, size_t last)
{
  switch (key) {
  case KEY_UP:
    position -= std::min<size_t>(position, 1);
    return;
  case KEY_DOWN:
    ++position;
    return;
  case KEY_PPAGE:
    position -= std::min(position, page);
    return;
  case KEY_NPAGE:
    position += page;
    return;
  case KEY_HOME:
    position = 0;
    return;
  case KEY_END:
    position = last;
    return;
  case KEY_MOUSE: {
    MEVENT event{};
    if (getmouse(&event) != OK)
      return;
    if (event.bstate & BUTTON4_PRESSED)
      position -= std::min<size_t>(position, 3);
    else if (event.bstate & BUTTON5_PRESSED)
      position += 3;
    return;
  }
  default:
    return;
  }
}

// Whether the terminal's input hung up or closed: getch() then returns at once, every time.
bool terminal_gone()
{
  pollfd input{STDIN_FILENO, POLLIN, 0};
  if (::poll(&input, 1, 0) < 0)
    return false;
  if (input.revents & (POLLHUP | POLLERR | POLLNVAL))
    return true;
  if (!(input.revents & POLLIN))
    return false;
  // Readable with nothing to read: end of file.
  int waiting = 0;
  return ::ioctl(STDIN_FILENO, FIONREAD, &waiting) == 0 && waiting == 0;
}

} // namespace

TopScreen::TopScreen(Callbacks callbacks) : callbacks_(std::move(callbacks)) {}

TopScreen::~TopScreen()
{
  quit_ = true;
  if (thread_.joinable())
    thread_.join();
}

void TopScreen::start()
{
  std::setlocale(LC_ALL, "");
  ascii_only_ = std::string_view(nl_langinfo(CODESET)) != "UTF-8";
  // SIGWINCH goes to the view's thread, which ncurses turns into KEY_RESIZE; threads started
  // later by the recording inherit the blocked mask.
  sigset_t winch;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  pthread_sigmask(SIG_BLOCK, &winch, nullptr);
  thread_ = caps::start_thread(caps::Role::kScreen, "flamebpf-screen", [this] { run(); });
}

void TopScreen::add(const profile::SymbolizedProfile& interval,
                    double own_cpu_percent,
                    std::string coverage)
{
  std::lock_guard lock(mutex_);
  auto compact = compact_interval(interval, model_.names());
  compact.own_cpu_percent = own_cpu_percent;
  compact.coverage = std::move(coverage);
  if (paused_) {
    if (held_.size() < kMaxHeldIntervals)
      held_.push_back(std::move(compact));
  } else {
    model_.add(std::move(compact));
  }
  changed_ = true;
}

void TopScreen::targets_changed(const std::vector<std::string>& stopped,
                                const std::vector<std::string>& started)
{
  std::lock_guard lock(mutex_);
  for (const auto& name : stopped)
    model_.target_stopped(name);
  for (const auto& name : started)
    model_.target_started(name);
  changed_ = true;
}

void TopScreen::run()
{
  sigset_t winch;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  pthread_sigmask(SIG_UNBLOCK, &winch, nullptr);
  initscr();
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  mousemask(BUTTON4_PRESSED | BUTTON5_PRESSED, nullptr);
  if (has_colors()) {
    start_color();
    use_default_colors();
  }
  timeout(100);
  started_ = true;
  {
    std::lock_guard lock(mutex_);
    draw();
  }
  while (!quit_) {
    int key = getch();
    if (key == ERR && terminal_gone()) {
      // Its terminal hung up (an SSH connection that dropped): the view ends the recording.
      quit_ = true;
      if (callbacks_.quit)
        callbacks_.quit();
      break;
    }
    std::lock_guard lock(mutex_);
    if (key != ERR)
      handle_key(key);
    if (key != ERR || changed_.exchange(false))
      draw();
  }
  endwin();
}

void TopScreen::handle_key(int key)
{
  status_.clear();
  if (key == 'q') {
    quit_ = true;
    if (callbacks_.quit)
      callbacks_.quit();
    return;
  }
  if (tree_) {
    switch (key) {
    case kKeyEscape:
    case KEY_BACKSPACE:
    case KEY_LEFT:
    case '\r':
    case '\n':
    case KEY_ENTER:
      tree_ = false;
      return;
    default:
      move_position(key, tree_scroll_, static_cast<size_t>(LINES), SIZE_MAX);
      return;
    }
  }
  switch (key) {
  case 'o':
    order_ = order_ == TopOrder::kSelf ? TopOrder::kTotal : TopOrder::kSelf;
    return;
  case 'w':
    window_ = window_ == TopWindow::kInterval   ? TopWindow::kDecaying
              : window_ == TopWindow::kDecaying ? TopWindow::kSinceStart
                                                : TopWindow::kInterval;
    return;
  case 't': {
    auto targets = model_.targets();
    auto it = std::find_if(targets.begin(), targets.end(),
                           [&](const auto& target) { return target.name == target_; });
    if (target_.empty())
      target_ = targets.empty() ? "" : targets.front().name;
    else if (it == targets.end() || it + 1 == targets.end())
      target_.clear();
    else
      target_ = (it + 1)->name;
    selected_ = 0;
    return;
  }
  case '/':
    prompt_filter();
    return;
  case 'p':
    paused_ = !paused_;
    if (!paused_) {
      for (auto& interval : held_)
        model_.add(std::move(interval));
      held_.clear();
    }
    return;
  case 's':
    save();
    return;
  case '\r':
  case '\n':
  case KEY_ENTER:
    if (selected_ < rows_.size()) {
      tree_ = true;
      tree_function_ = rows_[selected_].function;
      tree_scroll_ = 0;
    }
    return;
  default:
    move_position(key, selected_, static_cast<size_t>(std::max(1, LINES - 6)),
                  rows_.empty() ? 0 : rows_.size() - 1);
    return;
  }
}

void TopScreen::prompt_filter()
{
  // Read on the bottom line, the screen otherwise still; intervals wait meanwhile.
  std::string text;
  for (;;) {
    move(LINES - 1, 0);
    clrtoeol();
    put(LINES - 1, 0, "/" + terminal_safe(text, static_cast<size_t>(std::max(COLS - 2, 0)), true));
    refresh();
    int key = getch();
    if (key == ERR)
      continue;
    if (key == kKeyEscape)
      return;
    if (key == '\r' || key == '\n' || key == KEY_ENTER)
      break;
    if (key == KEY_BACKSPACE || key == 127 || key == 8) {
      if (!text.empty())
        text.pop_back();
    } else if (key >= 0x20 && key < 0x7f && text.size() < 256) {
      text.push_back(static_cast<char>(key));
    }
  }
  if (text.empty()) {
    filter_.reset();
    filter_text_.clear();
    return;
  }
  try {
    filter_.emplace(text, std::regex::ECMAScript | std::regex::icase);
    filter_text_ = text;
    selected_ = 0;
  } catch (const std::regex_error&) {
    status_ = "not a regular expression: " + text;
  }
}

void TopScreen::save()
{
  if (!callbacks_.save)
    return;
  status_ = callbacks_.save(model_.profile(window_, target_));
}

void TopScreen::draw()
{
  erase();
  if (tree_)
    draw_tree();
  else
    draw_list();
  refresh();
}

void TopScreen::draw_list()
{
  auto width = static_cast<size_t>(std::max(COLS, 1));
  const auto& last = model_.last();
  std::string header =
      fmt::format("flamebpf top{}  {}  sort: {}  {}", paused_ ? " [paused]" : "",
                  window_name(window_), order_ == TopOrder::kSelf ? "self" : "total",
                  last ? fmt::format("{} Hz, flamebpf {:.1f}% CPU, {} drops{}{}", last->frequency,
                                     last->own_cpu_percent, last->drops,
                                     last->coverage.empty() ? "" : ", ", last->coverage)
                       : std::string("waiting for the first interval"));
  put(0, 0, terminal_safe(header, width, ascii_only_), A_BOLD);
  int row = 1;
  // Targets: at most a quarter of the screen.
  auto targets = model_.targets();
  size_t target_lines = std::min<size_t>(targets.size(), std::max(1, (LINES - 4) / 4));
  for (size_t i = 0; i < target_lines; ++i) {
    const auto& target = targets[i];
    std::string line = fmt::format("{} {:>7.0f}/s {:>6.1f}% CPU{}  ",
                                   target.name == target_ ? ">" : " ", target.samples_per_second,
                                   target.cpu_percent, target.stopped ? "  stopped" : "");
    line += target.name;
    put(row++, 0, terminal_safe(line, width, ascii_only_));
  }
  if (targets.size() > target_lines)
    put(row - 1, 0,
        terminal_safe(fmt::format("  ... and {} more targets (t chooses one)",
                                  targets.size() - target_lines + 1),
                      width, ascii_only_));
  std::string columns = fmt::format("{:>6} {:>6} {:>8} {:<7} FUNCTION{}{}", "SELF%", "TOTAL%",
                                    "SAMPLES", "KIND", target_.empty() ? "" : " of " + target_,
                                    filter_ ? " matching /" + filter_text_ + "/" : "");
  put(row++, 0, terminal_safe(columns, width, ascii_only_), A_REVERSE);
  rows_ = model_.rows(window_, order_, target_, filter_);
  if (!rows_.empty())
    selected_ = std::min(selected_, rows_.size() - 1);
  else
    selected_ = 0;
  int visible = std::max(0, LINES - 1 - row);
  if (selected_ < first_shown_)
    first_shown_ = selected_;
  if (visible > 0 && selected_ >= first_shown_ + static_cast<size_t>(visible))
    first_shown_ = selected_ - static_cast<size_t>(visible) + 1;
  for (int i = 0; i < visible && first_shown_ + static_cast<size_t>(i) < rows_.size(); ++i) {
    size_t index = first_shown_ + static_cast<size_t>(i);
    const auto& entry = rows_[index];
    const auto& name = model_.names()[entry.function];
    std::string numbers = fmt::format(
        "{:>6.1f} {:>6.1f} {:>8.0f} {:<7} ", 100 * entry.self_share, 100 * entry.total_share,
        order_ == TopOrder::kSelf ? entry.self : entry.total, kind_label(name.kind));
    attr_t highlight = index == selected_ ? A_REVERSE : A_NORMAL;
    put(row, 0, terminal_safe(numbers, width, ascii_only_), highlight);
    if (numbers.size() < width) {
      int pair = pair_of(emit::frame_colour(name.text, name.kind));
      put(row, static_cast<int>(numbers.size()),
          terminal_safe(name.text, width - numbers.size(), ascii_only_),
          highlight | COLOR_PAIR(pair));
    }
    ++row;
  }
  std::string help =
      status_.empty() ? "q quit  o sort  w window  t target  / filter  Enter tree  p pause  s save"
                      : status_;
  put(LINES - 1, 0, terminal_safe(help, width, ascii_only_), A_BOLD);
}

void TopScreen::draw_tree()
{
  auto width = static_cast<size_t>(std::max(COLS, 1));
  const auto& name = model_.names()[tree_function_];
  auto tree = model_.tree(tree_function_, window_, target_, kMaxTreeLines);
  std::vector<std::pair<std::string, int>> lines; // text, colour pair
  auto add_tree = [&](const std::string& title, const std::vector<TopModel::TreeLine>& entries) {
    lines.emplace_back(title, -1);
    for (const auto& entry : entries) {
      const auto& function = model_.names()[entry.function];
      std::string text =
          fmt::format("{:>6.1f}% {}{}", 100 * entry.share,
                      std::string(static_cast<size_t>(2 * entry.depth), ' '), function.text);
      lines.emplace_back(text, pair_of(emit::frame_colour(function.text, function.kind)));
    }
    lines.emplace_back("", 0);
  };
  add_tree("Callers (towards the root):", tree.callers);
  add_tree("Callees (towards the leaves):", tree.callees);
  put(0, 0,
      terminal_safe(
          fmt::format("{} ({}), {}", name.text, kind_label(name.kind), window_name(window_)), width,
          ascii_only_),
      A_BOLD);
  int visible = std::max(0, LINES - 2);
  if (lines.size() > static_cast<size_t>(visible))
    tree_scroll_ = std::min(tree_scroll_, lines.size() - static_cast<size_t>(visible));
  else
    tree_scroll_ = 0;
  for (int i = 0; i < visible && tree_scroll_ + static_cast<size_t>(i) < lines.size(); ++i) {
    const auto& [text, pair] = lines[tree_scroll_ + static_cast<size_t>(i)];
    put(1 + i, 0, terminal_safe(text, width, ascii_only_),
        pair < 0 ? A_BOLD : static_cast<attr_t>(COLOR_PAIR(pair)));
  }
  put(LINES - 1, 0,
      terminal_safe(status_.empty() ? "Esc back  Up/Down scroll  q quit" : status_, width,
                    ascii_only_),
      A_BOLD);
}

} // namespace flamebpf::top
