// `flamebpf top`'s full-screen view, drawn with ncurses on a thread of its own: the recording's
// thread hands it each interval and never waits for the terminal, and keys are answered at once.
//   o      sort by self or by total samples
//   w      window: the last interval, a decaying average, or since the start
//   t      target: each in turn, then all
//   /      filter functions by a regular expression (an empty one clears it)
//   Enter  the selected function's callers and callees, as trees with shares (Esc: back)
//   p      pause (the screen stays; intervals are kept and shown when it goes on)
//   s      save the data behind the screen as folded stacks and a flame graph
//   q      quit
// Up, Down, Page Up, Page Down, Home, End and the mouse wheel move the selection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "top/top_table.h"

namespace flamebpf::top {

class TopScreen {
public:
  struct Callbacks {
    // Writes profile (the data behind the screen); returns what to say on the status line.
    std::function<std::string(const profile::SymbolizedProfile& profile)> save;
    // The user quit: the recording is to stop.
    std::function<void()> quit;
  };

  explicit TopScreen(Callbacks callbacks);
  // Restores the terminal.
  ~TopScreen();
  TopScreen(const TopScreen&) = delete;
  TopScreen& operator=(const TopScreen&) = delete;

  // Takes the terminal (standard output) and starts the view's thread.
  void start();
  // From the recording's thread: an interval (with flamebpf's CPU over it, and how its samples
  // cover the targets' CPU time: TopInterval), and targets that stopped or started.
  void
  add(const profile::SymbolizedProfile& interval, double own_cpu_percent, std::string coverage);
  void targets_changed(const std::vector<std::string>& stopped,
                       const std::vector<std::string>& started);

private:
  void run();
  void draw();
  void draw_list();
  void draw_tree();
  void handle_key(int key);
  void prompt_filter();
  void save();

  Callbacks callbacks_;
  std::thread thread_;
  std::atomic<bool> quit_{false};
  std::atomic<bool> changed_{false}; // an interval came since the last draw
  // Guards everything below: the recording's thread adds intervals, the view's thread draws.
  std::mutex mutex_;
  TopModel model_;
  std::vector<TopInterval> held_; // intervals that came while paused
  TopWindow window_ = TopWindow::kInterval;
  TopOrder order_ = TopOrder::kSelf;
  std::string target_; // empty: all
  std::string filter_text_;
  std::optional<std::regex> filter_;
  bool paused_ = false;
  bool tree_ = false;
  uint32_t tree_function_ = 0;
  size_t selected_ = 0;
  size_t first_shown_ = 0;
  size_t tree_scroll_ = 0;
  std::vector<TopRow> rows_;
  std::string status_;
  bool ascii_only_ = true;
  bool started_ = false;
};

} // namespace flamebpf::top
