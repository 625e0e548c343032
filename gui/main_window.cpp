#include "main_window.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <utility>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSet>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextDocument>
#include <QTimer>
#include <QToolBar>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>

#include <fmt/format.h>

#include "charts_panel.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "evaluate/evaluate.hpp"
#include "inventory/inventory.hpp"
#include "io/import/import.hpp"
#include "io/output_file.hpp"
#include "io/scenario_edit.hpp"
#include "io/yaml_edit.hpp"
#include "model/model.hpp"
#include "mutants.hpp"
#include "plan_form.hpp"
#include "present/verdict.hpp"
#include "sim/simulate.hpp"
#include "sweep_window.hpp"
#include "timeline_panel.hpp"
#include "words.hpp"

namespace ftplan::gui {

namespace {

// The answer's look: current (green), or results of an earlier text while this one has errors (amber).
constexpr const char* kAnswerStyle = "QLabel { background: #e8f3e8; padding: 6px; font-weight: bold; }";
constexpr const char* kStaleStyle = "QLabel { background: #fbe6bf; padding: 6px; font-weight: bold; }";

// Ends `form` with OK and Cancel and runs its dialog: true when it was accepted.
bool accepted(QDialog& dialog, QFormLayout* form) {
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  QObject::connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  QObject::connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  form->addRow(buttons);
  return dialog.exec() == QDialog::Accepted;
}

// A plan's name on lines of at most `width` characters, broken at spaces (a column header never
// hides the GPU count in an ellipsis).
QString wrapped(const QString& name, int width = 24) {
  QStringList lines;
  QString line;
  for (const QString& word : name.split(' ', Qt::SkipEmptyParts)) {
    if (!line.isEmpty() && line.size() + 1 + word.size() > width) {
      lines << line;
      line.clear();
    }
    line += (line.isEmpty() ? "" : " ") + word;
  }
  if (!line.isEmpty()) lines << line;
  return lines.join('\n');
}

}  // namespace

MainWindow::MainWindow(const model::Zoo& zoo, const hardware::Catalog& catalog) : zoo_(zoo), catalog_(catalog) {
  setWindowTitle("ftplan — fine-tuning capacity planner");

  // ---- left: what-if knobs, the scenario text, what is wrong with it
  auto* knobs = new QGroupBox("What if (applied to every plan)");
  auto* form = new QFormLayout(knobs);
  seq_ = new QSpinBox;
  seq_->setObjectName("seq_len");
  seq_->setRange(0, 1 << 20);
  seq_->setSingleStep(512);
  seq_->setSpecialValueText("as written");
  micro_ = new QSpinBox;
  micro_->setObjectName("micro_batch");
  micro_->setRange(0, 4096);
  micro_->setSpecialValueText("as written");
  micro_->setToolTip("In a search scenario: the only micro-batch the planner tries.");
  ckpt_ = new QComboBox;
  ckpt_->setObjectName("checkpointing");
  ckpt_->addItems(choices<plan::Checkpointing>({"as written"}));
  ckpt_->setToolTip("In a search scenario: the only checkpointing the planner tries.");
  precision_ = new QComboBox;
  precision_->setObjectName("precision");
  precision_->addItems(choices<plan::Precision>({"as written"}));
  form->addRow("sequence length", seq_);
  form->addRow("micro-batch", micro_);
  form->addRow("activation checkpointing", ckpt_);
  form->addRow("precision", precision_);

  // Per-plan controls: each edit is written into the chosen plan's text (io::set_plan_keys).
  plan_form_ = new PlanForm(catalog);
  connect(plan_form_, &PlanForm::keys_changed, this,
          [this](int plan, const std::vector<io::PlanKey>& keys, const QString& note) {
            if (!set_plan_keys(plan, keys))
              plan_form_->fill();  // back to what the text says
            else if (!note.isEmpty())
              statusBar()->showMessage(statusBar()->currentMessage() + " — " + note);
          });

  editor_ = new QPlainTextEdit;
  editor_->setObjectName("editor");
  editor_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  editor_->setLineWrapMode(QPlainTextEdit::NoWrap);
  editor_->setPlaceholderText("Open a scenario (File > Open), or type one: docs/scenario-format.md");
  errors_ = new QListWidget;
  errors_->setObjectName("errors");
  errors_->setWordWrap(true);
  errors_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  errors_->setStyleSheet("QListWidget { color: #a00000; }");
  errors_->setToolTip("Click an error to go to its line.");
  errors_->hide();
  connect(errors_, &QListWidget::itemClicked, this, &MainWindow::go_to_error);
  connect(errors_, &QListWidget::itemActivated, this, &MainWindow::go_to_error);

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(knobs);
  left_layout->addWidget(plan_form_);
  left_layout->addWidget(new QLabel("Scenario (YAML; edits are evaluated as you type)"));
  left_layout->addWidget(editor_, 1);
  left_layout->addWidget(errors_);

  // ---- right: headline, the answer, table, verdict, charts
  headline_ = new QLabel;
  headline_->setWordWrap(true);
  answer_ = new QLabel;
  answer_->setObjectName("answer");
  answer_->setWordWrap(true);
  answer_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  answer_->setStyleSheet(kAnswerStyle);
  basis_ = new QLabel;
  table_ = new QTableWidget;
  table_->setObjectName("table");
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->setWordWrap(true);
  connect(table_, &QTableWidget::cellClicked, this, &MainWindow::fix_clicked);
  table_->horizontalHeader()->setDefaultAlignment(Qt::AlignCenter);
  verdict_ = new QLabel;
  verdict_->setObjectName("verdict");
  verdict_->setWordWrap(true);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  verdict_->setStyleSheet("QLabel { background: #f3f6fa; padding: 6px; }");
  charts_ = new ChartsPanel;
  connect(charts_, &ChartsPanel::candidate_clicked, this, &MainWindow::add_candidate);
  // One traced step of a chosen plan (timeline_panel.hpp), simulated only when the tab is looked at.
  timeline_ = new TimelinePanel;
  charts_->addTab(timeline_, "Step timeline");
  connect(charts_, &QTabWidget::currentChanged, this, [this](int) {
    if (charts_->currentWidget() == timeline_) timeline_->show_if_stale();
  });
  connect(timeline_, &TimelinePanel::shown, this, &MainWindow::timeline_shown);

  auto* right = new QWidget;
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(headline_);
  right_layout->addWidget(answer_);
  right_layout->addWidget(basis_);
  // The table over the verdict and charts, split so that a short window scrolls the table
  // instead of drawing the charts over it (fill_table sizes the table to its rows).
  auto* below = new QWidget;
  auto* below_layout = new QVBoxLayout(below);
  below_layout->setContentsMargins(0, 0, 0, 0);
  // A long verdict (three plans, owned hardware, a bill of materials) scrolls within six lines
  // rather than pushing the charts off a short window.
  auto* verdict_area = new QScrollArea;
  verdict_area->setWidget(verdict_);
  verdict_area->setWidgetResizable(true);
  verdict_area->setFrameShape(QFrame::NoFrame);
  verdict_area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  verdict_area->setMaximumHeight(6 * verdict_->fontMetrics().lineSpacing() + 14);  // + the label's padding
  verdict_area->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
  below_layout->addWidget(verdict_area);
  below_layout->addWidget(charts_, 1);
  table_split_ = new QSplitter(Qt::Vertical);
  table_split_->addWidget(table_);
  table_split_->addWidget(below);
  table_split_->setChildrenCollapsible(false);
  table_split_->setStretchFactor(1, 1);
  right_layout->addWidget(table_split_, 1);

  auto* split = new QSplitter;
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 5);
  setCentralWidget(split);

  // ---- actions
  auto* file = menuBar()->addMenu("&File");
  file->addAction("&New scenario…", this, &MainWindow::new_scenario_dialog)->setShortcut(QKeySequence::New);
  file->addAction("&Import training configs…", this, &MainWindow::import_dialog);
  QAction* open = file->addAction("&Open scenario…", this, &MainWindow::open_dialog);
  recent_menu_ = file->addMenu("Open &recent");
  fill_recent_menu();
  open->setShortcut(QKeySequence::Open);
  file->addAction("&Save scenario", this, &MainWindow::save)->setShortcut(QKeySequence::Save);
  QAction* save = file->addAction("Save scenario &as…", this, &MainWindow::save_dialog);
  save->setShortcut(QKeySequence::SaveAs);
  file->addAction("Open and run a s&weep…", this, &MainWindow::open_sweep_dialog);
  file->addAction("Write the what-if &knobs into the scenario", this, &MainWindow::write_knobs);
  file->addAction("Export the ta&ble (JSON, CSV)…", this, &MainWindow::export_table_dialog);
  file->addAction("Export the c&harts (PNG, SVG)…", this, &MainWindow::export_charts_dialog);
  file->addAction("Export step &trace of the selected plan…", this, &MainWindow::export_trace_dialog);
  file->addSeparator();
  file->addAction("&Quit", qApp, &QApplication::quit)->setShortcut(QKeySequence::Quit);
  auto* baseline = menuBar()->addMenu("&Baseline");
  baseline->addAction("&Pin what is shown as the baseline", this, &MainWindow::pin)
      ->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_B));
  baseline->addAction("&Unpin", this, &MainWindow::unpin);
  QAction* run = menuBar()->addAction("&Evaluate", this, &MainWindow::start_evaluation);
  run->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));

  debounce_ = new QTimer(this);
  debounce_->setSingleShot(true);
  debounce_->setInterval(400);
  connect(debounce_, &QTimer::timeout, this, &MainWindow::start_evaluation);
  connect(editor_, &QPlainTextEdit::textChanged, this, &MainWindow::schedule_evaluation);
  connect(seq_, &QSpinBox::valueChanged, this, &MainWindow::schedule_evaluation);
  connect(micro_, &QSpinBox::valueChanged, this, &MainWindow::schedule_evaluation);
  connect(ckpt_, &QComboBox::currentIndexChanged, this, &MainWindow::schedule_evaluation);
  connect(precision_, &QComboBox::currentIndexChanged, this, &MainWindow::schedule_evaluation);
  connect(&watcher_, &QFutureWatcher<Outcome>::finished, this, &MainWindow::evaluation_done);
  connect(&trace_watcher_, &QFutureWatcher<TraceFile>::finished, this, &MainWindow::trace_done);
  statusBar()->showMessage("Open a scenario to compare its plans.");
  setAcceptDrops(true);  // scenario files and training configs (dropEvent)
  // The title's "*" while the text has edits not yet saved.
  connect(editor_->document(), &QTextDocument::modificationChanged, this, &MainWindow::setWindowModified);
  editor_->setFocus();
}

MainWindow::~MainWindow() {
  // A search stops between layouts and a comparison between plans: closing does not wait for the rest.
  if (stop_) stop_->store(true);
  watcher_.waitForFinished();
  // An export under way is finished and written (it was asked for), without a message box.
  trace_watcher_.waitForFinished();
  if (trace_awaited_) {
    const TraceFile t = trace_watcher_.result();
    try {
      io::write_file_atomically(t.file.toStdString(), t.json);
    } catch (const std::exception&) {
      // the window is going: nobody to tell; the old file, if any, is whole
    }
  }
}

bool MainWindow::open_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (QApplication::platformName() == "offscreen")
      std::fprintf(stderr, "ftplan-gui: cannot read %s\n", path.string().c_str());
    else
      QMessageBox::warning(this, "ftplan", q("cannot read " + path.string()));
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  editor_->setPlainText(q(text.str()));  // schedules an evaluation
  editor_->document()->setModified(false);
  set_path(path);
  return true;
}

QStringList MainWindow::recent_files() { return QSettings().value("recent").toStringList(); }

void MainWindow::set_path(const std::filesystem::path& path) {
  path_ = path;
  // "[*]": Qt shows "*" there while the document has unsaved edits (setWindowModified).
  setWindowTitle(q(path.filename().string()) + (mutant("unsaved_marker_missing") ? "" : "[*]") + " — ftplan");
  QStringList recent = recent_files();
  const QString file = q(std::filesystem::absolute(path).lexically_normal().string());
  recent.removeAll(file);
  if (!mutant("recent_files_not_recorded")) recent.prepend(file);
  while (recent.size() > 8) recent.removeLast();
  QSettings().setValue("recent", recent);
  fill_recent_menu();
}

void MainWindow::fill_recent_menu() {
  if (!recent_menu_) return;
  recent_menu_->clear();
  for (const QString& f : recent_files()) recent_menu_->addAction(f, this, [this, f] { open_file(f.toStdString()); });
  recent_menu_->setEnabled(!recent_menu_->isEmpty());
}

bool MainWindow::open_dropped(const std::vector<std::filesystem::path>& files) {
  if (files.empty()) return false;
  // Configs when every file reads as one (detect_config_format refuses a scenario file).
  const bool configs = std::all_of(files.begin(), files.end(), [](const std::filesystem::path& f) {
    try {
      io::detect_config_format(f);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  });
  if (configs) return import_configs(files);
  if (files.size() == 1) return open_file(files.front());
  warn("drop one scenario file, or the training configs of one job");
  return false;
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  std::vector<std::filesystem::path> files;
  for (const QUrl& url : event->mimeData()->urls())
    if (url.isLocalFile()) files.emplace_back(url.toLocalFile().toStdString());
  if (open_dropped(files)) event->acceptProposedAction();
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (!isWindowModified() || QApplication::platformName() == "offscreen") return event->accept();
  const auto choice = QMessageBox::question(
      this, "ftplan",
      q("Save the changes to " + (path_.empty() ? std::string("the scenario") : path_.filename().string()) + "?"),
      QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
  if (choice == QMessageBox::Cancel || (choice == QMessageBox::Save && !save())) return event->ignore();
  event->accept();
}

void MainWindow::new_scenario(const NewScenario& choices) {
  editor_->setPlainText(q(new_scenario_text(choices)));  // schedules an evaluation
  path_.clear();
  setWindowTitle("new scenario[*] — ftplan");
  editor_->document()->setModified(true);  // not on disk yet
}

bool MainWindow::import_configs(const std::vector<std::filesystem::path>& files, const std::string& gpu, int gpus) {
  std::vector<io::ImportOverride> overrides;
  if (!gpu.empty()) overrides.push_back({"plan.cluster.gpu", gpu, "the import dialog's GPU"});
  if (gpus > 0) overrides.push_back({"plan.cluster.gpus", std::to_string(gpus), "the import dialog's GPU count"});
  try {
    const io::ImportedScenario imported = io::import_configs(files, overrides, zoo_, &catalog_);
    editor_->setPlainText(q(imported.yaml));  // evaluated as any text; its header lists what was not used
  } catch (const std::exception& e) {
    warn(e.what());
    return false;
  }
  path_.clear();
  setWindowTitle("imported scenario[*] — ftplan");
  editor_->document()->setModified(true);
  return true;
}

void MainWindow::import_dialog() {
  const QStringList files =
      QFileDialog::getOpenFileNames(this, "Import the training configs of one job", q(path_.parent_path().string()),
                                    "Training configs (*.json *.yaml *.yml *.toml);;All files (*)");
  if (files.isEmpty()) return;
  // Configs rarely say the GPU; a launcher does (torchrun --nproc_per_node): asked here, as the
  // CLI's --gpu/--gpus give it.
  QDialog dialog(this);
  dialog.setWindowTitle("Import: where the job runs");
  auto* form = new QFormLayout(&dialog);
  auto* gpu = new QComboBox;
  gpu->addItem("(from the configs)");
  for (const auto& name : catalog_.gpu_names()) gpu->addItem(q(name));
  auto* count = new QSpinBox;
  count->setRange(0, 65536);
  count->setSpecialValueText("(from the configs)");
  form->addRow("GPU", gpu);
  form->addRow("GPUs", count);
  if (!accepted(dialog, form)) return;
  std::vector<std::filesystem::path> paths;
  for (const QString& f : files) paths.push_back(f.toStdString());
  import_configs(paths, gpu->currentIndex() > 0 ? gpu->currentText().toStdString() : std::string(), count->value());
}

// The new-scenario form: what a first comparison needs, every other key left to the text.
void MainWindow::new_scenario_dialog() {
  QDialog dialog(this);
  dialog.setWindowTitle("New scenario");
  auto* form = new QFormLayout(&dialog);
  auto* model = new QComboBox;
  model->setEditable(true);  // a zoo name, or a Hugging Face config.json's path
  for (const auto& name : zoo_.names()) model->addItem(q(name));
  model->setCurrentText("llama-3.1-8b");
  auto* browse = new QPushButton("config.json…");
  connect(browse, &QPushButton::clicked, &dialog, [&] {
    const QString file = QFileDialog::getOpenFileName(&dialog, "Hugging Face config.json", {}, "config.json (*.json)");
    if (!file.isEmpty()) model->setCurrentText(file);
  });
  auto* model_row = new QHBoxLayout;
  model_row->addWidget(model, 1);
  model_row->addWidget(browse);
  form->addRow("model", model_row);
  auto* method = new QComboBox;
  method->addItems(choices<plan::Method>());
  method->setCurrentText(plan::to_string(plan::Method::lora));
  form->addRow("method", method);
  auto* tokens = new QLineEdit("100M");
  form->addRow("tokens to train on", tokens);
  auto* seq = new QSpinBox;
  seq->setRange(128, 1 << 20);
  seq->setSingleStep(512);
  seq->setValue(4096);
  form->addRow("sequence length", seq);
  auto* gpu = new QComboBox;
  gpu->addItem("(a node instead)");
  for (const auto& name : catalog_.gpu_names()) gpu->addItem(q(name));
  gpu->setCurrentText("h100-sxm-80gb");
  auto* node = new QComboBox;
  node->addItem("(GPUs by count)");
  for (const auto& name : catalog_.node_names()) node->addItem(q(name));
  auto* count = new QSpinBox;
  count->setRange(1, 65536);
  count->setValue(8);
  form->addRow("GPU", gpu);
  form->addRow("or node", node);
  form->addRow("how many (GPUs, or nodes)", count);
  auto* offload = new QComboBox;
  offload->addItems(choices<plan::OffloadPreset>());
  form->addRow("offload", offload);
  auto* tiered = new QCheckBox("the offload as a second plan on one GPU (or one node) beside it");
  form->addRow("", tiered);
  if (!accepted(dialog, form)) return;
  NewScenario n;
  n.model = model->currentText().toStdString();
  n.method = method->currentText().toStdString();
  n.tokens = tokens->text().toStdString();
  n.seq_len = seq->value();
  n.gpu = gpu->currentIndex() > 0 ? gpu->currentText().toStdString() : std::string("h100-sxm-80gb");
  n.node = node->currentIndex() > 0 ? node->currentText().toStdString() : std::string();
  n.count = count->value();
  n.offload = offload->currentText().toStdString();
  n.compare_tiered = tiered->isChecked();
  plan::for_each_device_kind([&](const auto& kind) {
    if (kind.tier && !(catalog_.*kind.in_catalog).empty())
      n.tier_devices[kind.key] = (catalog_.*kind.in_catalog).front().name;
  });
  new_scenario(n);
}

void MainWindow::open_dialog() {
  const QString file = QFileDialog::getOpenFileName(this, "Open scenario", q(path_.parent_path().string()),
                                                    "Scenarios (*.yaml *.yml);;All files (*)");
  if (!file.isEmpty()) open_file(file.toStdString());
}

// Every file the window saves goes through io::write_file_atomically, as the CLI's do: a failed
// or interrupted save leaves the previous file whole. On failure, a message with the reason.
bool MainWindow::write_or_warn(const QString& file, const std::string& text) {
  try {
    io::write_file_atomically(file.toStdString(), text);
    return true;
  } catch (const std::exception& e) {
    QMessageBox::warning(this, "ftplan", q(e.what()));
    return false;
  }
}

void MainWindow::save_dialog() {
  const QString file =
      QFileDialog::getSaveFileName(this, "Save scenario as", q(path_.string()), "Scenarios (*.yaml *.yml)");
  if (file.isEmpty()) return;
  if (!write_or_warn(file, editor_->toPlainText().toStdString())) return;
  editor_->document()->setModified(false);
  set_path(file.toStdString());
}

Overrides MainWindow::overrides() const {
  Overrides o;
  if (seq_->value() > 0) o.seq_len = seq_->value();
  if (micro_->value() > 0) o.micro_batch = micro_->value();
  // ("as written" names no value)
  o.checkpointing = value_named<plan::Checkpointing>(ckpt_->currentText().toStdString());
  o.precision = value_named<plan::Precision>(precision_->currentText().toStdString());
  return o;
}

// One simulated step of the plan whose column is selected (else the first), as Chrome trace-event
// JSON for Perfetto: what `ftplan simulate --trace` writes.
void MainWindow::export_trace_dialog() {
  if (shown_.plans.empty()) {
    QMessageBox::information(this, "ftplan", "Nothing evaluated yet.");
    return;
  }
  // Column 0 is the first plan; then each plan and its "vs first" column.
  const int column = std::max(0, table_->currentColumn());
  const int index = std::min(column == 0 ? 0 : (column + 1) / 2, static_cast<int>(shown_.plans.size()) - 1);
  const QString file =
      QFileDialog::getSaveFileName(this, q("Step trace of " + shown_.plans[static_cast<std::size_t>(index)].name),
                                   "step-trace.json", "Chrome trace (*.json)");
  if (!file.isEmpty()) export_trace(index, file);
}

bool MainWindow::export_trace(int plan, const QString& file) {
  if (!shown_.scenario || plan < 0 || plan >= static_cast<int>(shown_.plans.size())) {
    statusBar()->showMessage("no such plan to trace");
    return false;
  }
  if (trace_watcher_.isRunning()) {
    statusBar()->showMessage("a step trace is being written: one at a time");
    return false;
  }
  const plan::Plan& p = shown_.plans[static_cast<std::size_t>(plan)];
  statusBar()->showMessage("simulating a step of '" + q(p.name) + "' with a trace…");
  trace_awaited_ = true;
  trace_watcher_.setFuture(QtConcurrent::run([model = shown_.scenario->model, p, file] {
    sim::Options o;
    o.trace = true;
    return TraceFile{file, p.name, evaluate::evaluate_plan(model, p, o).step.trace_json};
  }));
  return true;
}

void MainWindow::trace_done() {
  trace_awaited_ = false;
  const TraceFile t = trace_watcher_.result();
  if (!write_or_warn(t.file, t.json)) return;
  statusBar()->showMessage("trace of '" + q(t.plan) + "' written to " + t.file + " (open it in ui.perfetto.dev)");
  emit trace_exported(t.file);
}

void MainWindow::schedule_evaluation() { debounce_->start(); }

void MainWindow::start_evaluation() {
  debounce_->stop();
  if (watcher_.isRunning()) {
    // The running evaluation is of old text or knobs: stop it, and start again when it has.
    if (stop_) stop_->store(true);
    pending_ = true;
    return;
  }
  const std::string text = editor_->toPlainText().toStdString();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return;
  statusBar()->showMessage("evaluating…");
  stop_ = std::make_shared<std::atomic<bool>>(false);
  watcher_.setFuture(
      QtConcurrent::run([&zoo = zoo_, &catalog = catalog_, text, name = source_name(), base = base_dir(),
                         o = overrides(), stop = stop_, reuse = SearchReuse{shown_.search_key, shown_.search}] {
        return evaluate(text, name, base, zoo, catalog, o, stop.get(), reuse);
      }));
}

std::string MainWindow::source_name() const {
  return path_.empty() ? std::string("scenario") : path_.filename().string();
}

std::filesystem::path MainWindow::base_dir() const {
  return path_.empty() ? std::filesystem::current_path() : path_.parent_path();
}

void MainWindow::evaluation_done() {
  Outcome o = watcher_.result();
  if (!o.cancelled) show_outcome(std::move(o));
  if (pending_) {
    pending_ = false;
    start_evaluation();
  }
}

void MainWindow::evaluate_now() {
  debounce_->stop();
  show_outcome(evaluate(editor_->toPlainText().toStdString(), source_name(), base_dir(), zoo_, catalog_, overrides(),
                        nullptr, {shown_.search_key, shown_.search}));
}

void MainWindow::go_to_error(QListWidgetItem* item) {
  const int line = item ? item->data(Qt::UserRole).toInt() : 0;
  if (line <= 0) return;
  QTextCursor cursor(editor_->document()->findBlockByNumber(line - 1));
  editor_->setTextCursor(cursor);
  editor_->centerCursor();
  editor_->setFocus();
}

// Every error in the list, each line it names marked in the text, the list as tall as its
// messages (up to a third of the editor; it scrolls beyond).
void MainWindow::show_errors(const Outcome& o) {
  errors_->clear();
  QList<QTextEdit::ExtraSelection> marks;
  QSet<int> marked;
  for (std::size_t i = 0; i < o.errors.size(); ++i) {
    const int line = i < o.error_lines.size() ? o.error_lines[i] : 0;
    auto* item = new QListWidgetItem(q(o.errors[i]));
    item->setData(Qt::UserRole, line);
    item->setToolTip(line > 0 ? QString("line %1: click to go there").arg(line) : QString());
    errors_->addItem(item);
    if (line <= 0 || marked.contains(line)) continue;
    marked.insert(line);
    QTextEdit::ExtraSelection mark;
    mark.format.setBackground(QColor(255, 225, 225));
    mark.format.setProperty(QTextFormat::FullWidthSelection, true);
    mark.cursor = QTextCursor(editor_->document()->findBlockByNumber(line - 1));
    marks.append(mark);
  }
  editor_->setExtraSelections(marks);
  if (o.errors.empty()) {
    errors_->hide();
    return;
  }
  const int width = std::max(200, editor_->viewport()->width() - 12);
  const QFontMetrics metrics(errors_->font());
  int height = 2 * errors_->frameWidth() + 4;
  for (int r = 0; r < errors_->count(); ++r)
    height += metrics.boundingRect(QRect(0, 0, width, 0), Qt::TextWordWrap, errors_->item(r)->text()).height() + 6;
  errors_->setFixedHeight(std::min(height, std::max(120, editor_->height() / 3)));
  errors_->show();
}

void MainWindow::show_outcome(Outcome outcome) {
  show_errors(outcome);
  if (!outcome.scenario) {
    statusBar()->showMessage(
        QString("%1 problem(s) in the scenario%2")
            .arg(outcome.errors.size())
            .arg(table_->columnCount() > 0 ? "; the results shown are from the last good one" : ""));
    // Results of an earlier text must not read as the current one's: the answer says so on top
    // (amber), and the table and verdict are greyed until the text evaluates again.
    if (shown_.scenario && !mutant("stale_results_not_marked")) {
      answer_->setText(QString("Not current: the text has %1 problem(s), listed under it. Below: the last text that "
                               "evaluated (%2)")
                           .arg(outcome.errors.size())
                           .arg(q(shown_.answer)));
      answer_->setStyleSheet(kStaleStyle);
      table_->setEnabled(false);
      verdict_->setEnabled(false);
    }
    emit evaluated();
    return;
  }
  answer_->setStyleSheet(kAnswerStyle);
  table_->setEnabled(true);
  verdict_->setEnabled(true);
  shown_ = std::move(outcome);
  const Outcome& o = shown_;
  const plan::Scenario& s = *o.scenario;
  headline_->setText(q(fmt::format(
      "{} — {} ({} params), {} fine-tune, {} tokens of seq {}", s.name, s.model.display_name,
      ftplan::format_count(static_cast<double>(model::count_params(s.model).total)), plan::to_string(s.job.method),
      ftplan::format_count(static_cast<double>(s.job.tokens)), s.job.seq_len)));
  if (!mutant("answer_not_updated")) answer_->setText(q(o.answer));
  // The verdict, then what compare prints under it: what each plan's capex buys, the owned plans'
  // crossover and the notes.
  std::string verdict = o.verdict;
  if (!o.bought.empty() && !mutant("bill_of_materials_missing")) verdict += " " + o.bought;
  if (!o.ownership.empty()) verdict += " " + o.ownership;
  if (!mutant("advice_notes_missing"))
    for (const auto& note : o.advice) verdict += "\nNote: " + note;
  verdict_->setText(q(verdict));
  redraw();
  statusBar()->showMessage(o.search
                               ? QString("%1 layouts searched, %2 simulated, in %3 s")
                                     .arg(o.search->enumerated)
                                     .arg(o.search->simulated)
                                     .arg(o.seconds, 0, 'f', 2)
                               : QString("%1 plan(s) evaluated in %2 s").arg(o.plans.size()).arg(o.seconds, 0, 'f', 2));
  emit evaluated();
}

void MainWindow::redraw() {
  const Outcome& o = shown_;
  if (!o.scenario) return;
  QString basis =
      q("costs: " + (o.comparison.one_basis ? o.comparison.basis : std::string("per plan (the 'costs' row)")));
  if (pinned_) basis += "; against the pinned baseline (blue: changes, dashed marks in the charts)";
  basis_->setText(basis);
  // Where each rented plan's rate comes from and what it leaves out: compare's "Rent:" line.
  basis_->setToolTip(q(o.rent));
  show_table(o);
  charts_->show_outcome(o, pinned_ ? &*pinned_ : nullptr);
  std::vector<TimelinePanel::Shown> traced;
  for (std::size_t i = 0; i < o.plans.size(); ++i)
    traced.push_back(
        {o.plans[i], o.evaluations[i].feasible() ? std::string() : "does not fit (" + o.evaluations[i].reason() + ")"});
  timeline_->set_plans(o.scenario->model, std::move(traced));
  if (charts_->currentWidget() == timeline_) timeline_->show_if_stale();
  plan_form_->set_plans(o.scenario ? &o.scenario->plans : nullptr);
}

int MainWindow::control_plan() const { return plan_form_->current(); }

void MainWindow::warn(const std::string& message) {
  statusBar()->showMessage(q(message));
  if (QApplication::platformName() == "offscreen")
    std::fprintf(stderr, "ftplan-gui: %s\n", message.c_str());
  else
    QMessageBox::warning(this, "ftplan", q(message));
}

// Only the lines that changed are replaced (the view stays where it is), in one edit: one Undo.
void MainWindow::replace_text(const std::string& text) {
  const QString now = editor_->toPlainText(), want = q(text);
  int head = 0;
  while (head < now.size() && head < want.size() && now[head] == want[head]) ++head;
  int tail = 0;
  while (tail < now.size() - head && tail < want.size() - head &&
         now[now.size() - 1 - tail] == want[want.size() - 1 - tail])
    ++tail;
  QTextCursor c(editor_->document());
  c.setPosition(head);
  c.setPosition(static_cast<int>(now.size()) - tail, QTextCursor::KeepAnchor);
  c.insertText(want.mid(head, want.size() - head - tail));  // schedules an evaluation
}

bool MainWindow::set_plan_keys(int plan, const std::vector<io::PlanKey>& keys) {
  if (!shown_.scenario || plan < 0 || plan >= static_cast<int>(shown_.scenario->plans.size())) return false;
  const plan::Plan& p = shown_.scenario->plans[static_cast<std::size_t>(plan)];
  const std::string text = editor_->toPlainText().toStdString();
  try {
    // The text may have changed since it was evaluated: the plan must still be there by its name.
    const auto name = io::yaml_value(text, fmt::format("plans.{}.name", plan), source_name());
    if (!name || *name != p.name) {
      warn(fmt::format("plan '{}' is not item {} of the text's plans now: wait for the evaluation of the edit", p.name,
                       plan + 1));
      return false;
    }
    replace_text(io::set_plan_keys(text, static_cast<std::size_t>(plan), p, keys, source_name()));
  } catch (const InputError& e) {
    warn(fmt::format("Not written into plan '{}': {}", p.name, e.what()));
    return false;
  }
  std::string what;
  for (const auto& k : keys)
    what += (what.empty() ? "" : ", ") + k.key + (k.value.empty() ? " removed" : ": " + k.value);
  statusBar()->showMessage(q(fmt::format("plan '{}': {} (Save to keep it)", p.name, what)));
  return true;
}

bool MainWindow::apply_fix(int plan, int fix) {
  if (!shown_.scenario || plan < 0 || plan >= static_cast<int>(shown_.plans.size())) return false;
  const auto i = static_cast<std::size_t>(plan);
  if (fix < 0 || fix >= static_cast<int>(shown_.fixes[i].size())) return false;
  const int t = i < shown_.text_plan.size() ? shown_.text_plan[i] : -1;
  if (t < 0) {
    warn("a search's pick is not in the text: add its layout as a plan from the Search tab first");
    return false;
  }
  // From the plan as shown (the knobs on it) to the fitting one: the change alone.
  if (!set_plan_keys(t, io::plan_changes(shown_.plans[i], shown_.fixes[i][static_cast<std::size_t>(fix)].plan)))
    return false;
  if (overrides().any())
    statusBar()->showMessage(statusBar()->currentMessage() +
                             " — the what-if knobs still apply on top of the text: set them to \"as written\"");
  return true;
}

bool MainWindow::add_candidate(int candidate) {
  if (!shown_.search || candidate < 0 || candidate >= static_cast<int>(shown_.search->candidates.size())) return false;
  const plan::Plan& p = shown_.search->candidates[static_cast<std::size_t>(candidate)].plan;
  // A name no plan of the text has yet.
  std::string name = p.name;
  const auto taken = [&](const std::string& n) {
    return std::any_of(shown_.scenario->plans.begin(), shown_.scenario->plans.end(),
                       [&](const plan::Plan& o) { return o.name == n; });
  };
  for (int k = 2; taken(name); ++k) name = fmt::format("{} ({})", p.name, k);
  try {
    replace_text(
        io::add_plan(editor_->toPlainText().toStdString(), shown_.scenario->job, p, name, &catalog_, source_name()));
  } catch (const InputError& e) {
    warn(fmt::format("The layout was not added: {}", e.what()));
    return false;
  }
  statusBar()->showMessage(q("added plan '" + name + "' to the text (shown beside the picks; Save to keep it)"));
  return true;
}

void MainWindow::fix_clicked(int row, int column) {
  if (row != table_->rowCount() - 1 || !shown_.scenario) return;
  const int plan = column == 0 ? 0 : column % 2 == 1 ? (column + 1) / 2 : -1;  // column_of's inverse
  if (plan < 0 || plan >= static_cast<int>(shown_.fixes.size()) || shown_.fixes[static_cast<std::size_t>(plan)].empty())
    return;
  QMenu menu(this);
  const auto& fixes = shown_.fixes[static_cast<std::size_t>(plan)];
  for (std::size_t k = 0; k < fixes.size(); ++k)
    menu.addAction(
        q(fmt::format("Apply: {} ({} per GPU)", fixes[k].change, ftplan::format_bytes(fixes[k].gpu_peak_bytes))), this,
        [this, plan, k] { apply_fix(plan, static_cast<int>(k)); });
  menu.exec(QCursor::pos());
}

void MainWindow::wait_for_timeline() { timeline_->wait(); }

void MainWindow::pin() {
  if (!shown_.scenario) return;
  pinned_ = shown_;
  redraw();
  statusBar()->showMessage("pinned as the baseline: changes are shown against it");
}

void MainWindow::unpin() {
  pinned_.reset();
  redraw();
}

void MainWindow::open_sweep_dialog() {
  const QString file = QFileDialog::getOpenFileName(this, "Open sweep", q(path_.parent_path().string()),
                                                    "Sweeps (*.yaml *.yml);;All files (*)");
  if (file.isEmpty()) return;
  if (!sweep_window_) sweep_window_ = new SweepWindow(zoo_, catalog_, this);
  sweep_window_->show();
  sweep_window_->raise();
  if (!sweep_window_->open(file.toStdString())) statusBar()->showMessage("the sweep did not load: see its window");
}

bool MainWindow::write_knobs() {
  const KnobEdit edit =
      with_knobs(editor_->toPlainText().toStdString(), source_name(), base_dir(), zoo_, catalog_, overrides());
  if (!edit.problem.empty()) {
    if (QApplication::platformName() == "offscreen")
      std::fprintf(stderr, "ftplan-gui: %s\n", edit.problem.c_str());
    else
      QMessageBox::warning(this, "ftplan", q("The knobs were not written: " + edit.problem));
    return false;
  }
  {
    // The knobs back to "as written" (their values are in the text now), without an evaluation each.
    const QSignalBlocker a(seq_), b(micro_), c(ckpt_), d(precision_);
    seq_->setValue(0);
    micro_->setValue(0);
    ckpt_->setCurrentIndex(0);
    precision_->setCurrentIndex(0);
  }
  // One edit of the document, so Undo takes it back.
  QTextCursor all(editor_->document());
  all.select(QTextCursor::Document);
  all.insertText(q(edit.text));  // schedules an evaluation
  statusBar()->showMessage("the knobs' values are in the text now (Save to keep them)");
  return true;
}

bool MainWindow::save() {
  if (path_.empty()) {
    save_dialog();
    return !path_.empty();
  }
  if (!write_or_warn(q(path_.string()), editor_->toPlainText().toStdString())) return false;
  editor_->document()->setModified(false);
  statusBar()->showMessage(q("saved " + path_.string()));
  return true;
}

bool MainWindow::export_table(const std::filesystem::path& file) {
  const std::string text =
      file.extension() == ".csv" && !mutant("csv_export_writes_json") ? results_csv(shown_) : results_json(shown_);
  if (text.empty()) return false;
  return write_or_warn(q(file.string()), text);
}

std::vector<std::filesystem::path> MainWindow::export_charts(const std::filesystem::path& file) {
  const bool svg = file.extension() == ".svg";
#if !FTPLAN_GUI_SVG
  if (svg) {
    QMessageBox::warning(this, "ftplan", "This ftplan-gui was built without Qt Svg: export charts as .png.");
    return {};
  }
#endif
  std::vector<std::filesystem::path> written;
  for (const auto& [name, bytes] : charts_->render(svg)) {
    std::filesystem::path out = file;
    out.replace_filename(file.stem().string() + "-" + name + file.extension().string());
    if (!write_or_warn(q(out.string()), std::string(bytes.constData(), static_cast<std::size_t>(bytes.size()))))
      return written;
    written.push_back(out);
  }
  statusBar()->showMessage(QString("%1 chart(s) written").arg(written.size()));
  return written;
}

void MainWindow::export_table_dialog() {
  const QString file =
      QFileDialog::getSaveFileName(this, "Export the table", "results.json", "JSON (*.json);;CSV (*.csv)");
  if (!file.isEmpty()) export_table(file.toStdString());
}

void MainWindow::export_charts_dialog() {
  const QString file = QFileDialog::getSaveFileName(this, "Export the charts (one file each, named after the chart)",
                                                    "charts.png", "PNG (*.png);;SVG (*.svg)");
  if (!file.isEmpty()) export_charts(file.toStdString());
}

// `ftplan compare`'s table (present::comparison): each plan, and each after the first against the
// first; a plan that does not fit is shaded and has no time or dollars; why, and what would fit.
void MainWindow::show_table(const Outcome& o) {
  const std::vector<plan::Plan>& plans = o.plans;
  const present::Comparison& c = o.comparison;
  const int n = static_cast<int>(plans.size());
  // The pinned baseline's plan of the same name as shown plan i.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  const auto pinned_index = [&](int i) {
    if (!pinned_) return kNone;
    for (std::size_t j = 0; j < pinned_->plans.size(); ++j)
      if (pinned_->plans[j].name == plans[static_cast<std::size_t>(i)].name) return j;
    return kNone;
  };
  const int n_rows = static_cast<int>(c.rows.size());
  table_->clear();
  table_->setRowCount(n_rows + 2);
  table_->setColumnCount(n == 0 ? 0 : 2 * n - 1);
  QStringList headers;
  const QStringList shorts = short_names(plans);
  for (int i = 0; i < n; ++i) {
    const QString full = q(plans[static_cast<std::size_t>(i)].name);
    // A planner pick: what it was picked for on the first line, the layout under it.
    // The charts' name for it on top when that is not the start of its own ("plan 2").
    const QString chart_name = shorts[i];
    const QString prefix = full.startsWith(chart_name) || full.contains(": ") ? QString() : chart_name + "\n";
    headers << prefix + (full.contains(": ") ? full.section(": ", 0, 0) + ":\n" + wrapped(full.section(": ", 1))
                                             : wrapped(full));
    if (i > 0) headers << "vs first";
  }
  table_->setHorizontalHeaderLabels(headers);
  QStringList labels;
  for (const auto& r : c.rows) labels << q(r.name);
  labels << "why not"
         << "what would fit";
  table_->setVerticalHeaderLabels(labels);
  const auto put = [&](int row, int column, const QString& text, bool shaded) {
    auto* item = new QTableWidgetItem(text);
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    if (shaded) item->setBackground(QColor(255, 235, 235));
    table_->setItem(row, column, item);
    return item;
  };
  for (int i = 0; i < n; ++i) {
    const auto& e = o.evaluations[static_cast<std::size_t>(i)];
    const bool ok = e.feasible();
    for (int r = 0; r < n_rows; ++r) {
      const auto& row = c.rows[static_cast<std::size_t>(r)];
      // (mutant: the MFU row's first two plans trade cells)
      const bool swap = mutant("mfu_cells_swapped") && row.name == "MFU" && n > 1 && i < 2;
      put(r, column_of(i), q(row.cells[static_cast<std::size_t>(swap ? 1 - i : i)]),
          !ok && !mutant("unfit_not_shaded"));
      if (i > 0)
        put(r, column_of(i) + 1, mutant("vs_first_empty") ? QString() : q(row.vs_first[static_cast<std::size_t>(i)]),
            !ok)
            ->setForeground(QColor(90, 90, 90));
    }
    // Against the pinned baseline: the change of each figure of a plan of the same name.
    const std::size_t j = mutant("pinned_changes_missing") ? kNone : pinned_index(i);
    if (j != kNone)
      for (int r = 0; r < n_rows; ++r) {
        const auto& row = c.rows[static_cast<std::size_t>(r)];
        const auto was = std::find_if(pinned_->comparison.rows.begin(), pinned_->comparison.rows.end(),
                                      [&](const auto& p) { return p.name == row.name; });
        if (was == pinned_->comparison.rows.end()) continue;
        const std::string& before = was->cells[j];
        const std::string& now = row.cells[static_cast<std::size_t>(i)];
        if (before == now) continue;
        QTableWidgetItem* item = table_->item(r, column_of(i));
        const double a = was->values[j], b = row.values[static_cast<std::size_t>(i)];
        item->setText(item->text() +
                      (a > 0 && b > 0
                           ? QString("  \u0394%1%2%")
                                 .arg(b >= a ? "+" : "")
                                 .arg((mutant("pinned_change_sign_flipped") ? -100 : 100) * (b / a - 1), 0, 'f', 0)
                           : QString("  (was %1)").arg(q(before))));
        item->setToolTip(q("pinned: " + before));
        item->setForeground(QColor(0, 90, 170));
      }
    QTableWidgetItem* why = put(n_rows, column_of(i), ok ? QString() : q(e.reason()), !ok);
    why->setToolTip(why->text());
    why->setTextAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    const auto& fixes = o.fixes[static_cast<std::size_t>(i)];
    QStringList would;
    for (std::size_t k = 0; k < fixes.size() && k < 2; ++k)
      would << q(fmt::format("{} ({})", fixes[k].change, ftplan::format_bytes(fixes[k].gpu_peak_bytes)));
    QTableWidgetItem* fit = put(n_rows + 1, column_of(i), would.join("\n"), !ok);
    fit->setTextAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    QStringList all;
    for (const auto& f : fixes) all << q(f.change);
    fit->setToolTip(all.isEmpty() ? QString()
                                  : "Click to apply one (written into the plan's text):\n" + all.join("\n"));
  }
  // Columns as wide as the figures; the reasons wrap within them.
  table_->setRowHidden(n_rows, true);
  table_->setRowHidden(n_rows + 1, true);
  table_->resizeColumnsToContents();
  table_->setRowHidden(n_rows, mutant("why_not_row_hidden") || std::all_of(o.evaluations.begin(), o.evaluations.end(),
                                                                           [](const auto& e) { return e.feasible(); }));
  table_->setRowHidden(n_rows + 1,
                       mutant("what_would_fit_row_hidden") ||
                           std::all_of(o.fixes.begin(), o.fixes.end(), [](const auto& f) { return f.empty(); }));
  if (mutant("last_column_hidden") && table_->columnCount() > 0)
    table_->setColumnHidden(table_->columnCount() - 1, true);
  table_->resizeRowsToContents();
  for (int col = 0; col < table_->columnCount(); ++col)
    if (QTableWidgetItem* h = table_->horizontalHeaderItem(col)) h->setToolTip(h->text());
  // As tall as its rows: the charts get the rest.
  int height = table_->horizontalHeader()->sizeHint().height() + 2 * table_->frameWidth() + 2;
  for (int r = 0; r < table_->rowCount(); ++r)
    if (!table_->isRowHidden(r)) height += table_->verticalHeader()->sectionSize(r);
  if (table_->horizontalScrollBar()->isVisible() || table_->horizontalHeader()->length() > table_->viewport()->width())
    height += table_->horizontalScrollBar()->sizeHint().height();
  // As tall as its rows where the window allows; else it scrolls (the charts keep their minimum).
  table_->setMinimumHeight(std::min(height, 120));
  table_->setMaximumHeight(height);
  // The verdict and charts keep their minimum (their axes and legends) where the table can still
  // show its first eight rows or so (180 px); it scrolls the rest.
  const int below = table_split_->widget(1)->minimumSizeHint().height();
  const int shown =
      std::clamp(table_split_->height() - table_split_->handleWidth() - below, std::min(height, 180), height);
  table_split_->setSizes({shown, std::max(0, table_split_->height() - shown)});
}

}  // namespace ftplan::gui
