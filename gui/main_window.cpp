#include "main_window.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <QAction>
#include <QApplication>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalBarSeries>
#include <QHorizontalStackedBarSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSet>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QStatusBar>
#include <QTableWidget>
#include <QTextBlock>
#include <QTimer>
#include <QToolBar>
#include <QValueAxis>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>

#include <fmt/format.h>

#include "inventory/inventory.hpp"
#include "io/output_file.hpp"
#include "io/units.hpp"
#include "model/model.hpp"
#include "sim/simulate.hpp"

namespace ftplan::gui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// A chart with no legend margins wasted and the given title.
QChart* new_chart(const QString& title) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  return chart;
}

// Category axis of plan names, value axis from 0, both attached to `series`; horizontal bars
// put the categories on the left, where long labels fit.
void attach_axes(QChart* chart, QAbstractBarSeries* series, const QStringList& names, const QString& unit,
                 bool horizontal = false) {
  auto* categories = new QBarCategoryAxis;
  categories->append(names);
  categories->setTruncateLabels(false);
  QFont small = categories->labelsFont();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  categories->setLabelsFont(small);
  auto* values = new QValueAxis;
  values->setTitleText(unit);
  values->setLabelFormat("%.3g");
  values->setMin(0);
  chart->addSeries(series);
  chart->addAxis(categories, horizontal ? Qt::AlignLeft : Qt::AlignBottom);
  chart->addAxis(values, horizontal ? Qt::AlignBottom : Qt::AlignLeft);
  series->attachAxis(categories);
  series->attachAxis(values);
  values->applyNiceNumbers();
}

// Short labels for chart categories: the plans' first words when those are short and distinct
// ("A", "B" of "A 32x H100 FSDP", ...), else "plan 1", "plan 2", ...
QStringList short_names(const std::vector<plan::Plan>& plans) {
  // A planner pick ("cheapest: 32x h100 ...") is named by what it was picked for.
  if (std::all_of(plans.begin(), plans.end(), [](const plan::Plan& p) { return p.name.find(": ") != std::string::npos; })) {
    QStringList picks;
    for (const auto& p : plans) picks << q(p.name.substr(0, p.name.find(": ")));
    if (QSet<QString>(picks.begin(), picks.end()).size() == picks.size()) return picks;
  }
  QStringList first;
  for (const auto& p : plans) first << q(p.name).section(' ', 0, 0);
  const bool usable = std::all_of(first.begin(), first.end(), [](const QString& w) { return !w.isEmpty() && w.size() <= 8; }) &&
                      QSet<QString>(first.begin(), first.end()).size() == first.size();
  if (usable) return first;
  QStringList numbered;
  for (std::size_t i = 0; i < plans.size(); ++i) numbered << QString("plan %1").arg(i + 1);
  return numbered;
}

}  // namespace

MainWindow::MainWindow(const model::Zoo& zoo, const hardware::Catalog& catalog) : zoo_(zoo), catalog_(catalog) {
  setWindowTitle("ftplan — fine-tuning capacity planner");

  // ---- left: what-if knobs, the scenario text, what is wrong with it
  auto* knobs = new QGroupBox("What if (applied to every plan)");
  auto* form = new QFormLayout(knobs);
  seq_ = new QSpinBox;
  seq_->setRange(0, 1 << 20);
  seq_->setSingleStep(512);
  seq_->setSpecialValueText("as written");
  micro_ = new QSpinBox;
  micro_->setRange(0, 4096);
  micro_->setSpecialValueText("as written");
  ckpt_ = new QComboBox;
  ckpt_->addItems({"as written", "none", "selective", "full"});
  precision_ = new QComboBox;
  precision_->addItems({"as written", "bf16-mixed", "fp16-mixed", "bf16", "fp8-mixed", "fp32"});
  form->addRow("sequence length", seq_);
  form->addRow("micro-batch", micro_);
  form->addRow("activation checkpointing", ckpt_);
  form->addRow("precision", precision_);

  editor_ = new QPlainTextEdit;
  editor_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  editor_->setLineWrapMode(QPlainTextEdit::NoWrap);
  editor_->setPlaceholderText("Open a scenario (File > Open), or type one: docs/scenario-format.md");
  errors_ = new QListWidget;
  errors_->setMaximumHeight(110);
  errors_->setWordWrap(true);
  errors_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  errors_->setStyleSheet("QListWidget { color: #a00000; }");
  errors_->hide();

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(knobs);
  left_layout->addWidget(new QLabel("Scenario (YAML; edits are evaluated as you type)"));
  left_layout->addWidget(editor_, 1);
  left_layout->addWidget(errors_);

  // ---- right: headline, table, verdict, charts
  headline_ = new QLabel;
  headline_->setWordWrap(true);
  QFont bold = headline_->font();
  bold.setBold(true);
  headline_->setFont(bold);
  table_ = new QTableWidget;
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  verdict_ = new QLabel;
  verdict_->setWordWrap(true);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  verdict_->setStyleSheet("QLabel { background: #f3f6fa; padding: 6px; }");
  time_chart_ = new QChartView;
  cost_chart_ = new QChartView;
  memory_chart_ = new QChartView;
  for (QChartView* v : {time_chart_, cost_chart_, memory_chart_}) {
    v->setRenderHint(QPainter::Antialiasing);
    v->setMinimumHeight(300);
  }
  auto* charts = new QHBoxLayout;
  charts->addWidget(time_chart_);
  charts->addWidget(cost_chart_);
  charts->addWidget(memory_chart_);

  auto* right = new QWidget;
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(headline_);
  right_layout->addWidget(table_);
  right_layout->addWidget(verdict_);
  right_layout->addLayout(charts, 1);

  auto* split = new QSplitter;
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 5);
  setCentralWidget(split);

  // ---- actions
  auto* file = menuBar()->addMenu("&File");
  QAction* open = file->addAction("&Open scenario…", this, &MainWindow::open_dialog);
  open->setShortcut(QKeySequence::Open);
  QAction* save = file->addAction("&Save scenario as…", this, &MainWindow::save_dialog);
  save->setShortcut(QKeySequence::SaveAs);
  file->addAction("Export step &trace of the selected plan…", this, &MainWindow::export_trace);
  file->addSeparator();
  file->addAction("&Quit", qApp, &QApplication::quit)->setShortcut(QKeySequence::Quit);
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
  statusBar()->showMessage("Open a scenario to compare its plans.");
  editor_->setFocus();
}

MainWindow::~MainWindow() { watcher_.waitForFinished(); }

bool MainWindow::open_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (QApplication::platformName() == "offscreen") std::fprintf(stderr, "ftplan-gui: cannot read %s\n", path.string().c_str());
    else QMessageBox::warning(this, "ftplan", q("cannot read " + path.string()));
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  path_ = path;
  setWindowTitle(q(path.filename().string() + " — ftplan"));
  editor_->setPlainText(q(text.str()));  // schedules an evaluation
  return true;
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
  const QString file = QFileDialog::getSaveFileName(this, "Save scenario as", q(path_.string()), "Scenarios (*.yaml *.yml)");
  if (file.isEmpty()) return;
  if (!write_or_warn(file, editor_->toPlainText().toStdString())) return;
  path_ = file.toStdString();
  setWindowTitle(q(path_.filename().string() + " — ftplan"));
}

Overrides MainWindow::overrides() const {
  Overrides o;
  if (seq_->value() > 0) o.seq_len = seq_->value();
  if (micro_->value() > 0) o.micro_batch = micro_->value();
  static const plan::Checkpointing ckpts[] = {plan::Checkpointing::none, plan::Checkpointing::selective,
                                              plan::Checkpointing::full};
  if (ckpt_->currentIndex() > 0) o.checkpointing = ckpts[ckpt_->currentIndex() - 1];
  static const plan::Precision precisions[] = {plan::Precision::bf16_mixed, plan::Precision::fp16_mixed, plan::Precision::bf16,
                                               plan::Precision::fp8_mixed, plan::Precision::fp32};
  if (precision_->currentIndex() > 0) o.precision = precisions[precision_->currentIndex() - 1];
  return o;
}

// One simulated step of the plan whose column is selected (else the first), as Chrome trace-event
// JSON for Perfetto: what `ftplan simulate --trace` writes.
void MainWindow::export_trace() {
  if (shown_.plans.empty()) {
    QMessageBox::information(this, "ftplan", "Nothing evaluated yet.");
    return;
  }
  const int column = std::max(0, table_->currentColumn());
  const plan::Plan& p = shown_.plans[static_cast<std::size_t>(std::min<int>(column, static_cast<int>(shown_.plans.size()) - 1))];
  const QString file = QFileDialog::getSaveFileName(this, q("Step trace of " + p.name), "step-trace.json",
                                                    "Chrome trace (*.json)");
  if (file.isEmpty()) return;
  sim::Options o;
  o.trace = true;
  const sim::StepResult r = sim::simulate_step(shown_.scenario->model, p, o);
  if (!write_or_warn(file, r.trace_json)) return;
  statusBar()->showMessage("trace of '" + q(p.name) + "' written to " + file + " (open it in ui.perfetto.dev)");
}

void MainWindow::schedule_evaluation() { debounce_->start(); }

void MainWindow::start_evaluation() {
  debounce_->stop();
  if (watcher_.isRunning()) {
    pending_ = true;  // evaluate again when this one is done
    return;
  }
  const std::string text = editor_->toPlainText().toStdString();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return;
  statusBar()->showMessage("evaluating…");
  watcher_.setFuture(QtConcurrent::run([&zoo = zoo_, &catalog = catalog_, text, name = source_name(), base = base_dir(),
                                        o = overrides()] { return evaluate(text, name, base, zoo, catalog, o); }));
}

std::string MainWindow::source_name() const { return path_.empty() ? std::string("scenario") : path_.filename().string(); }

std::filesystem::path MainWindow::base_dir() const {
  return path_.empty() ? std::filesystem::current_path() : path_.parent_path();
}

void MainWindow::evaluation_done() {
  show_outcome(watcher_.result());
  if (pending_) {
    pending_ = false;
    start_evaluation();
  }
}

void MainWindow::evaluate_now() {
  debounce_->stop();
  show_outcome(evaluate(editor_->toPlainText().toStdString(), source_name(), base_dir(), zoo_, catalog_, overrides()));
}

void MainWindow::mark_error_line(int line) {
  QList<QTextEdit::ExtraSelection> marks;
  if (line > 0) {
    QTextEdit::ExtraSelection mark;
    mark.format.setBackground(QColor(255, 225, 225));
    mark.format.setProperty(QTextFormat::FullWidthSelection, true);
    mark.cursor = QTextCursor(editor_->document()->findBlockByNumber(line - 1));
    marks.append(mark);
  }
  editor_->setExtraSelections(marks);
}

void MainWindow::show_outcome(Outcome outcome) {
  errors_->clear();
  mark_error_line(outcome.error_line);
  if (!outcome.scenario) {
    for (const auto& e : outcome.errors) errors_->addItem(q(e));
    errors_->setVisible(!outcome.errors.empty());
    statusBar()->showMessage(QString("%1 problem(s) in the scenario%2").arg(outcome.errors.size())
                                 .arg(table_->columnCount() > 0 ? "; the results shown are from the last good one" : ""));
    return;
  }
  errors_->hide();
  shown_ = std::move(outcome);
  const Outcome& o = shown_;
  const plan::Scenario& s = *o.scenario;
  headline_->setText(q(fmt::format("{} — {} ({} params), {} fine-tune, {} tokens of seq {}", s.name, s.model.display_name,
                                   io::format_count(static_cast<double>(model::count_params(s.model).total)),
                                   plan::to_string(s.job.method), io::format_count(static_cast<double>(s.job.tokens)),
                                   s.job.seq_len)));
  verdict_->setText(q(o.verdict));
  show_table(o);
  show_charts(o);
  statusBar()->showMessage(o.search ? QString("%1 layouts searched, %2 simulated, in %3 s")
                                          .arg(o.search->enumerated).arg(o.search->simulated).arg(o.seconds, 0, 'f', 2)
                                    : QString("%1 plan(s) evaluated in %2 s").arg(o.plans.size()).arg(o.seconds, 0, 'f', 2));
}

void MainWindow::show_table(const Outcome& o) {
  const std::vector<plan::Plan>& plans = o.plans;
  const auto& ev = o.evaluations;
  struct Row {
    const char* name;
    std::string (*cell)(const plan::Plan&, const evaluate::Evaluation&);
  };
  static const Row rows[] = {
      {"fits?", [](const plan::Plan&, const evaluate::Evaluation& e) { return std::string(e.feasible() ? "yes" : "NO"); }},
      {"GPUs",
       [](const plan::Plan& p, const evaluate::Evaluation&) { return fmt::format("{} x {}", p.cluster.gpus(), p.cluster.gpu.name); }},
      {"peak GPU memory (of usable)",
       [](const plan::Plan&, const evaluate::Evaluation& e) {
         return fmt::format("{} / {}", io::format_bytes(e.memory.gpu_peak_bytes), io::format_bytes(e.memory.gpu_capacity_bytes));
       }},
      {"step time", [](const plan::Plan&, const evaluate::Evaluation& e) { return io::format_duration(e.step.step_time_s); }},
      {"job time", [](const plan::Plan&, const evaluate::Evaluation& e) { return io::format_duration(e.cost.job_time_s); }},
      {"tokens/s", [](const plan::Plan&, const evaluate::Evaluation& e) { return fmt::format("{:.0f}", e.step.tokens_per_s); }},
      {"MFU", [](const plan::Plan&, const evaluate::Evaluation& e) { return fmt::format("{:.1f}%", 100 * e.step.mfu); }},
      {"bound by",
       [](const plan::Plan&, const evaluate::Evaluation& e) {
         return fmt::format("{} ({:.0f}%)", e.step.bound_by, 100 * e.step.bound_utilization);
       }},
      {"peak power", [](const plan::Plan&, const evaluate::Evaluation& e) { return fmt::format("{:.1f} kW", e.power.peak_power_w / 1e3); }},
      {"energy (facility)", [](const plan::Plan&, const evaluate::Evaluation& e) { return fmt::format("{:.1f} kWh", e.cost.energy_kwh); }},
      {"cost", [](const plan::Plan&, const evaluate::Evaluation& e) { return fmt::format("${:.0f}", e.cost.cost_usd); }},
      {"$ per million tokens",
       [](const plan::Plan&, const evaluate::Evaluation& e) { return fmt::format("${:.2f}", e.cost.usd_per_million_tokens); }},
      {"flash written (wear)",
       [](const plan::Plan&, const evaluate::Evaluation& e) {
         return e.cost.nvme_written_bytes > 0
                    ? fmt::format("{:.1f} TB ({:.2f}%)", e.cost.nvme_written_bytes / 1e12, 100 * e.cost.wear_fraction)
                    : std::string("-");
       }},
  };
  const int n_rows = static_cast<int>(std::size(rows));
  table_->clear();
  table_->setRowCount(n_rows + 1);
  table_->setColumnCount(static_cast<int>(plans.size()));
  QStringList names;
  const QStringList shorts = short_names(plans);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const QString full = q(plans[i].name);
    names << (full.startsWith(shorts[static_cast<int>(i)]) ? full : shorts[static_cast<int>(i)] + ": " + full);
    names.back().replace(": ", ":\n");  // long names on two lines
  }
  table_->setHorizontalHeaderLabels(names);
  QStringList labels;
  for (const Row& r : rows) labels << r.name;
  labels << "why not";
  table_->setVerticalHeaderLabels(labels);
  for (std::size_t c = 0; c < plans.size(); ++c) {
    const bool ok = ev[c].feasible();
    for (int r = 0; r < n_rows; ++r) {
      auto* item = new QTableWidgetItem(q(rows[r].cell(plans[c], ev[c])));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (!ok) item->setBackground(QColor(255, 235, 235));
      table_->setItem(r, static_cast<int>(c), item);
    }
    auto* why = new QTableWidgetItem(ok ? QString() : q(ev[c].reason()));
    why->setToolTip(why->text());
    table_->setItem(n_rows, static_cast<int>(c), why);
  }
  // As tall as its rows: the charts get the rest.
  for (int c = 0; c < table_->columnCount(); ++c)
    if (QTableWidgetItem* h = table_->horizontalHeaderItem(c)) h->setToolTip(h->text());
  int height = table_->horizontalHeader()->sizeHint().height() + 2 * table_->frameWidth();
  for (int r = 0; r < table_->rowCount(); ++r) height += table_->verticalHeader()->sectionSize(r);
  table_->setFixedHeight(height);
}

void MainWindow::show_charts(const Outcome& o) {
  const std::vector<plan::Plan>& plans = o.plans;
  const QStringList names = short_names(plans);

  if (o.search) {
    // The planner's whole search: every simulated layout by job time and dollars, the Pareto
    // front (time, $, peak power) drawn over them.
    QChart* chart = new_chart("Searched plans: job time vs cost");
    auto* all = new QScatterSeries;
    all->setName("simulated");
    all->setMarkerSize(6);
    all->setColor(QColor(170, 170, 170));
    auto* front = new QScatterSeries;
    front->setName("Pareto front");
    front->setMarkerSize(9);
    front->setColor(QColor(200, 40, 40));
    const planner::Result& r = *o.search;
    for (std::size_t i = 0; i < r.candidates.size(); ++i) {
      const auto& e = r.candidates[i].evaluation;
      if (!e.feasible()) continue;
      const QPointF p(e.cost.job_time_s / 3600, e.cost.cost_usd);
      if (std::find(r.pareto.begin(), r.pareto.end(), static_cast<int>(i)) != r.pareto.end()) *front << p;
      else *all << p;
    }
    chart->addSeries(all);
    chart->addSeries(front);
    auto* x = new QLogValueAxis;
    x->setTitleText("job time (h)");
    x->setLabelFormat("%.3g");
    auto* y = new QLogValueAxis;
    y->setTitleText("cost ($)");
    y->setLabelFormat("%.3g");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    for (QScatterSeries* series : {all, front}) {
      series->attachAxis(x);
      series->attachAxis(y);
    }
    QChart* old = time_chart_->chart();
    time_chart_->setChart(chart);
    delete old;
  } else {
    // Job time, hours; infeasible plans show none.
    QChart* chart = new_chart("Job time (hours)");
    // Horizontal bars fill from the bottom: plans go in last to first, so the first is on top.
    auto* set = new QBarSet("job time");
    QStringList labelled;  // the exact figure by each bar: a fast plan's bar can be a sliver
    for (std::size_t i = plans.size(); i-- > 0;) {
      const auto& e = o.evaluations[i];
      *set << (e.feasible() ? e.cost.job_time_s / 3600 : 0.0);
      labelled << names[static_cast<int>(i)] + "  " + (e.feasible() ? q(io::format_duration(e.cost.job_time_s)) : "does not fit");
    }
    auto* series = new QHorizontalBarSeries;
    series->append(set);
    attach_axes(chart, series, labelled, "h", true);
    chart->legend()->hide();
    QChart* old = time_chart_->chart();
    time_chart_->setChart(chart);
    delete old;
  }
  // Dollars: hardware, energy and flash wear.
  {
    QChart* chart = new_chart("Cost ($)");
    auto* hw = new QBarSet("hardware");
    auto* energy = new QBarSet("energy");
    auto* wear = new QBarSet("flash wear");
    QStringList labelled;
    for (std::size_t i = plans.size(); i-- > 0;) {
      const auto& e = o.evaluations[i];
      const bool ok = e.feasible();
      *hw << (ok ? e.cost.hardware_usd : 0.0);
      *energy << (ok ? e.cost.energy_usd : 0.0);
      *wear << (ok ? e.cost.wear_usd : 0.0);
      labelled << names[static_cast<int>(i)] + "  " + (ok ? q(fmt::format("${:.0f}", e.cost.cost_usd)) : "does not fit");
    }
    auto* series = new QHorizontalStackedBarSeries;
    series->append({hw, energy, wear});
    attach_axes(chart, series, labelled, "$", true);
    QChart* old = cost_chart_->chart();
    cost_chart_->setChart(chart);
    delete old;
  }
  // GPU memory per GPU at its peak, by category, against each plan's usable memory.
  {
    QChart* chart = new_chart("GPU memory per GPU at peak (GiB)");
    auto* series = new QStackedBarSeries;
    for (int c = 0; c < inventory::kCategories; ++c) {
      auto* set = new QBarSet(inventory::to_string(static_cast<inventory::Category>(c)));
      for (const auto& e : o.evaluations) *set << e.memory.gpu.bytes[static_cast<std::size_t>(c)] / (1u << 30);
      series->append(set);
    }
    attach_axes(chart, series, names, "GiB (usable: see the table)");
    chart->legend()->setAlignment(Qt::AlignRight);
    QChart* old = memory_chart_->chart();
    memory_chart_->setChart(chart);
    delete old;
  }
}

}  // namespace ftplan::gui
