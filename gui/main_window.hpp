// The planner's window: the scenario as text (every key the CLI reads) with what-if knobs on
// top, and the plans side by side: the answer in one line, the comparison table `ftplan compare`
// prints, the verdict, and charts of job time, dollars and memory per tier (GPU, host DRAM,
// NVMe) against each plan's capacity; for a search, every simulated plan against the
// constraints. Edits are evaluated on a worker thread after a short pause; a newer edit, or
// closing the window, cancels the evaluation under way.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QFutureWatcher>
#include <QMainWindow>

#include "evaluation.hpp"
#include "io/scenario_edit.hpp"
#include "sim/simulate.hpp"

class QComboBox;
class QGroupBox;
class QLabel;
class QListWidget;
class QListWidgetItem;
class QPlainTextEdit;
class QSpinBox;
class QSplitter;
class QTabWidget;
class QTableWidget;
class QTimer;

namespace ftplan::gui {

class ChartsPanel;
class PlanForm;
class TimelinePanel;
class SweepWindow;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  MainWindow(const model::Zoo& zoo, const hardware::Catalog& catalog);
  ~MainWindow() override;  // cancels a running evaluation and waits for it to stop (it reads the zoo and catalog)

  // Loads a scenario file into the editor (false, with a message, when it cannot be read).
  bool open_file(const std::filesystem::path& path);
  // Starts a new, unsaved scenario from the new-scenario form's choices (new_scenario_text).
  void new_scenario(const NewScenario& choices);
  // The new-scenario form (File > New scenario; shown at start when no scenario is given), then
  // new_scenario with what it was given.
  void new_scenario_dialog();
  // Translates training configs (DeepSpeed, accelerate, torchtune, torchtitan, TrainingArguments,
  // PEFT, Axolotl, LLaMA-Factory: `ftplan import`'s reader, io::import_configs) into a new, unsaved
  // scenario in the editor; `gpu` and `gpus` ("" / 0: from the configs) as `--gpu`/`--gpus` give
  // them. False, with the importer's message naming file and key, when the configs do not read.
  bool import_configs(const std::vector<std::filesystem::path>& files, const std::string& gpu = "", int gpus = 0);
  void import_dialog();  // File > Import training configs…: the files, then the GPU they run on
  // What a drop of `files` on the window does: true when it imported or opened them.
  bool open_dropped(const std::vector<std::filesystem::path>& files);
  // Evaluates the editor's text now, on this thread, and shows the result (for --screenshot).
  void evaluate_now();
  // What the window shows now (the last evaluation that read clean).
  const Outcome& shown() const { return shown_; }
  // The table's column of plan `i` (each plan after the first is followed by its "vs first" column).
  static int column_of(int plan) { return plan == 0 ? 0 : 2 * plan - 1; }

  // Writes the text to the file it came from (false, with a message, when it cannot; Save as when
  // there is none).
  bool save();
  // The shown plans to `file`: .json or .csv as `ftplan compare --format json/csv` writes them.
  bool export_table(const std::filesystem::path& file);
  // Every chart to `file` with the chart's name added ("out.png" -> "out-job-time.png", ...); PNG,
  // or SVG where the GUI was built with Qt Svg. Returns the files written (none after a message).
  std::vector<std::filesystem::path> export_charts(const std::filesystem::path& file);
  // Keeps what is shown as the baseline: the table and charts then show each plan of the same
  // name against it. Again: a new baseline; unpin() drops it.
  void pin();
  void unpin();
  // Writes the what-if knobs' values into the text's job block (with_knobs) and sets the knobs
  // back to "as written"; false, with the reason, when that would not say what the knobs do.
  bool write_knobs();
  // The text's plan `plan` (its index in the text's `plans`) with `keys` set through
  // io::set_plan_keys (comments and layout kept; one Undo takes it back), then evaluated again;
  // false, with the writer's reason, when it refuses. The per-plan controls write through this.
  bool set_plan_keys(int plan, const std::vector<io::PlanKey>& keys);
  // Applies "what would fit" change `fix` (Outcome::fixes) of shown plan `plan` to the plan's text.
  bool apply_fix(int plan, int fix);
  // Adds the search's candidate `candidate` (planner::Result::candidates) to the text's `plans`,
  // shown beside the picks from then on (the search block stays: the what-if is against it).
  bool add_candidate(int candidate);
  // The text plan the per-plan controls edit (-1: none).
  int control_plan() const;
  // Until the step timeline's traced simulation (on a worker thread) is on screen.
  void wait_for_timeline();
  // One simulated step of shown plan `plan` with a trace, written to `file` as Chrome trace-event
  // JSON (what `ftplan simulate --trace` writes): simulated on a worker thread, so the window stays
  // live (a 70B plan's traced step takes seconds); trace_exported(file) once written. False (with a
  // status message) when there is no such plan or an export is under way.
  bool export_trace(int plan, const QString& file);
  // The scenario files opened or saved lately, newest first (QSettings "recent", at most 8); File
  // > Open recent lists them.
  static QStringList recent_files();

 signals:
  // An evaluation's result is on screen (or its errors are).
  void evaluated();
  // The step timeline shows a newly simulated step.
  void timeline_shown();
  // export_trace wrote its file.
  void trace_exported(const QString& file);

 private slots:
  void open_dialog();
  void save_dialog();
  void export_trace_dialog();
  void trace_done();
  void schedule_evaluation();
  void start_evaluation();
  void evaluation_done();
  void go_to_error(QListWidgetItem* item);
  void export_table_dialog();
  void export_charts_dialog();
  void open_sweep_dialog();

 protected:
  // Unsaved edits (the title's "*") ask before the window closes: save, discard or stay.
  void closeEvent(QCloseEvent* event) override;
  // Files dropped on the window: training configs are imported (import_configs), anything else
  // one at a time is opened as a scenario.
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void set_path(const std::filesystem::path& path);  // the file the text is now, in the title and the recent list
  void fill_recent_menu();
  Overrides overrides() const;
  std::string source_name() const;         // what reader messages call the text
  std::filesystem::path base_dir() const;  // where relative paths in it resolve
  void show_outcome(Outcome outcome);
  void redraw();  // table and charts of shown_ (against pinned_)      // kept in shown_ when it evaluated
  void show_errors(const Outcome& outcome);
  void show_table(const Outcome& outcome);
  bool write_or_warn(const QString& file, const std::string& text);  // atomically; false after a message
  void warn(const std::string& message);                             // a message box (stderr off screen)
  void replace_text(const std::string& text);                        // one edit of the document, so Undo takes it back
  void fix_clicked(int row, int column);  // the table's "what would fit" row: a menu of changes

  const model::Zoo& zoo_;
  const hardware::Catalog& catalog_;
  std::filesystem::path path_;  // the file the text came from ("" = none)
  QMenu* recent_menu_ = nullptr;
  Outcome shown_;                  // what the window shows now (the last good evaluation)
  std::optional<Outcome> pinned_;  // the baseline the what-if is shown against

  QPlainTextEdit* editor_ = nullptr;
  QSpinBox* seq_ = nullptr;
  QSpinBox* micro_ = nullptr;
  QComboBox* ckpt_ = nullptr;
  QComboBox* precision_ = nullptr;
  QListWidget* errors_ = nullptr;
  QLabel* headline_ = nullptr;
  QLabel* answer_ = nullptr;
  QLabel* basis_ = nullptr;
  QTableWidget* table_ = nullptr;
  QSplitter* table_split_ = nullptr;  // the table over the verdict and the charts
  QLabel* verdict_ = nullptr;
  ChartsPanel* charts_ = nullptr;  // the charts' tabs, and the step timeline's
  PlanForm* plan_form_ = nullptr;  // the per-plan controls, written into the chosen plan's text
  TimelinePanel* timeline_ = nullptr;
  SweepWindow* sweep_window_ = nullptr;  // opened on demand, a window of its own
  QTimer* debounce_ = nullptr;
  QFutureWatcher<Outcome> watcher_;
  struct TraceFile {
    QString file;
    std::string plan;
    std::string json;
  };
  QFutureWatcher<TraceFile> trace_watcher_;  // export_trace's traced step
  bool trace_awaited_ = false;               // started, and trace_done has not written it yet
  std::shared_ptr<std::atomic<bool>> stop_;  // the running evaluation's cancel flag
  bool pending_ = false;                     // the text changed while an evaluation ran
};

}  // namespace ftplan::gui
