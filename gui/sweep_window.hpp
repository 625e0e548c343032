// A sweep file, run with progress and cancel, and any output of it as a heatmap over two of its
// axes (e.g. which plan is cheapest within the deadline, over model size and deadline). The
// sweep runs on worker threads (ftplan::sweep::run, as `ftplan sweep` runs it).
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <QFutureWatcher>
#include <QWidget>

#include "io/rows.hpp"
#include "sweep/sweep.hpp"
#include "sweep_grid.hpp"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;

namespace ftplan::gui {

class Heatmap;

class SweepWindow : public QWidget {
  Q_OBJECT

 public:
  SweepWindow(const model::Zoo& zoo, const hardware::Catalog& catalog, QWidget* parent = nullptr);
  ~SweepWindow() override;  // stops the run (after the points under way) and waits for it

  // Loads a sweep file and starts it (false, with the reader's message shown, when it cannot).
  bool open(const std::filesystem::path& file);
  void cancel();
  bool running() const { return watcher_.isRunning(); }
  // Rows so far (every point's, once the run is done).
  std::size_t rows() const;
  std::vector<io::Row> results() const;
  // Shows `field` of `plan` ("" = each point's first) over the axes x and y (column names, "axis.*").
  void show_grid(const std::string& x, const std::string& y, const std::string& field, const std::string& plan);
  // Holds axis column `axis` (one not on the map) at `value` from now on, and redraws.
  void hold(const std::string& axis, const std::string& value);
  const SweepGrid& grid() const { return grid_; }
  const SweepGrid& drawn_grid() const;  // what the heatmap draws now

 signals:
  void finished();  // the run ended (done or cancelled)

 private slots:
  void done();
  void redraw();

 private:
  const model::Zoo& zoo_;
  const hardware::Catalog& catalog_;
  std::optional<sweep::Sweep> sweep_;
  std::vector<std::string> axes_;
  mutable std::mutex mutex_;
  std::vector<io::Row> rows_;
  std::atomic<std::int64_t> points_done_{0};
  std::shared_ptr<std::atomic<bool>> stop_;
  QFutureWatcher<void> watcher_;
  SweepGrid grid_;

  QLabel* title_ = nullptr;
  QWidget* hold_row_ = nullptr;              // a picker per held axis (objectName "hold:" + its column)
  std::map<std::string, std::string> hold_;  // the values chosen there
  void clear_hold_pickers();
  QProgressBar* progress_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QComboBox* x_ = nullptr;
  QComboBox* y_ = nullptr;
  QComboBox* field_ = nullptr;
  QComboBox* plan_ = nullptr;
  Heatmap* heatmap_ = nullptr;
};

}  // namespace ftplan::gui
