// The planner's window: the scenario as text (every key the CLI reads) with what-if knobs on
// top, and the plans side by side: a comparison table, the verdict, and charts of job time,
// dollars and GPU memory. Edits are evaluated on a worker thread after a short pause.
#pragma once

#include <filesystem>
#include <string>

#include <QFutureWatcher>
#include <QMainWindow>

#include "evaluation.hpp"

class QComboBox;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;
class QTableWidget;
class QTimer;
class QChartView;

namespace ftplan::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  MainWindow(const model::Zoo& zoo, const hardware::Catalog& catalog);
  ~MainWindow() override;  // waits for a running evaluation (it reads the zoo and catalog)

  // Loads a scenario file into the editor (false, with a message, when it cannot be read).
  bool open_file(const std::filesystem::path& path);
  // Evaluates the editor's text now, on this thread, and shows the result (for --screenshot).
  void evaluate_now();

 private slots:
  void open_dialog();
  void save_dialog();
  void export_trace();
  void schedule_evaluation();
  void start_evaluation();
  void evaluation_done();

 private:
  Overrides overrides() const;
  std::string source_name() const;           // what reader messages call the text
  std::filesystem::path base_dir() const;    // where relative paths in it resolve
  void show_outcome(Outcome outcome);  // kept in shown_ when it evaluated
  void show_table(const Outcome& outcome);
  void show_charts(const Outcome& outcome);
  void mark_error_line(int line);
  bool write_or_warn(const QString& file, const std::string& text);  // atomically; false after a message

  const model::Zoo& zoo_;
  const hardware::Catalog& catalog_;
  std::filesystem::path path_;  // the file the text came from ("" = none)
  Outcome shown_;               // what the window shows now (the last good evaluation)

  QPlainTextEdit* editor_ = nullptr;
  QSpinBox* seq_ = nullptr;
  QSpinBox* micro_ = nullptr;
  QComboBox* ckpt_ = nullptr;
  QComboBox* precision_ = nullptr;
  QListWidget* errors_ = nullptr;
  QLabel* headline_ = nullptr;
  QTableWidget* table_ = nullptr;
  QLabel* verdict_ = nullptr;
  QChartView* time_chart_ = nullptr;
  QChartView* cost_chart_ = nullptr;
  QChartView* memory_chart_ = nullptr;
  QTimer* debounce_ = nullptr;
  QFutureWatcher<Outcome> watcher_;
  bool pending_ = false;  // the text changed while an evaluation ran
};

}  // namespace ftplan::gui
