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
#include <QBarCategoryAxis>
#include <QBarLegendMarker>
#include <QBarSet>
#include <QBuffer>
#include <QChart>
#include <QChartView>
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
#include <QHorizontalBarSeries>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QListWidget>
#include <QLogValueAxis>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QResizeEvent>
#include <QScatterSeries>
#include <QScrollBar>
#include <QSet>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextDocument>
#include <QTimer>
#include <QToolBar>
#include <QToolTip>
#include <QUrl>
#include <QVBoxLayout>
#include <QValueAxis>
#include <QtConcurrent/QtConcurrent>
#if FTPLAN_GUI_SVG
#include <QSvgGenerator>
#endif

#include <fmt/format.h>

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
#include "present/verdict.hpp"
#include "sim/simulate.hpp"
#include "sweep_window.hpp"
#include "timeline_panel.hpp"

namespace ftplan::gui {

namespace {

// One colour per memory category, the same in every chart, scenario and edit (Tableau 10's, each
// dark enough to read on white). Taken by position from the theme, a colour moved whenever a
// category was empty: blue was weights in the GPU chart and activations in the host chart beside
// it, and "buffers" and "overhead" came out near-white.
// The answer's look: current (green), or results of an earlier text while this one has errors (amber).
constexpr const char* kAnswerStyle = "QLabel { background: #e8f3e8; padding: 6px; font-weight: bold; }";
constexpr const char* kStaleStyle = "QLabel { background: #fbe6bf; padding: 6px; font-weight: bold; }";

QColor category_color(inventory::Category c) {
  static const std::array<QColor, inventory::kCategories> kColors = {
      QColor(31, 119, 180),   // weights: blue
      QColor(44, 160, 44),    // gradients: green
      QColor(255, 127, 14),   // optimizer: orange
      QColor(148, 103, 189),  // activations: purple
      QColor(214, 39, 40),    // temporaries: red
      QColor(140, 86, 75),    // buffers: brown
      QColor(227, 119, 194),  // overhead: pink
  };
  return kColors[static_cast<std::size_t>(c)];
}

QString q(const std::string& s) { return QString::fromStdString(s); }

// An enum's names as the scenario reader takes them (its table, common/enum_names.hpp), after
// `first` (a combo's "as written"): the choices of a combo box.
template <class E>
QStringList choices(QStringList first = {}) {
  for (const std::string& name : names_of<E>()) first << q(name);
  return first;
}

// Ends `form` with OK and Cancel and runs its dialog: true when it was accepted.
bool accepted(QDialog& dialog, QFormLayout* form) {
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  QObject::connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  QObject::connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  form->addRow(buttons);
  return dialog.exec() == QDialog::Accepted;
}

constexpr double kGiB = 1u << 30;

// A chart with no legend margins wasted and the given title.
QChart* new_chart(const QString& title) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  QFont small = chart->legend()->font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  chart->legend()->setFont(small);
  // A legend entry elided in a narrow window ("allocator sl...") shows its whole name on hover.
  chart->legend()->setShowToolTips(true);
  return chart;
}

// Tick labels with as many decimals as the axis' scale needs: "1000", not "1e+03".
QString label_format(double max) { return max >= 10 ? "%.0f" : max >= 1 ? "%.1f" : "%.2f"; }

// A value axis shows as many ticks as fit its chart's width, ~38 px a label: at 1280 x 720 the
// three charts of the first tab share ~650 px, and six labels each were elided to "...".
// `data_max` (value_axis) is the axis' range before nice numbers, which each fit starts from.
// `plot_width`: the plot area's width, when known better than the chart's own (during a resize,
// before the chart has laid itself out again).
void fit_ticks(QChartView* view, double plot_width = 0) {
  QChart* chart = view->chart();
  if (!chart) return;
  const double plot = plot_width > 0 ? plot_width : chart->plotArea().width();
  const double width = plot > 0 ? plot : 0.6 * view->width();
  const int ticks = std::clamp(static_cast<int>(width / 38) + 1, 2, 6);
  for (QAbstractAxis* a : chart->axes(Qt::Horizontal)) {
    auto* v = qobject_cast<QValueAxis*>(a);
    if (!v || v->property("data_max").isNull() || v->property("fitted_ticks").toInt() == ticks) continue;
    v->setRange(0, v->property("data_max").toDouble());
    v->setTickCount(ticks);
    v->applyNiceNumbers();
    // Nice numbers may add ticks (0-161 in 3 became 0-200 in 5, 25 px a label): back to at most
    // `ticks` over the nice range, at the most that split it into nice steps (1, 2, 2.5, 5 x 10^k).
    for (int n = std::min(ticks, v->tickCount()); n >= 2 && v->tickCount() > ticks; --n) {
      const double step = (v->max() - v->min()) / (n - 1);
      const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
      for (const double nice : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (std::abs(mantissa - nice) < 1e-9) v->setTickCount(n);
    }
    v->setLabelFormat(label_format(v->max()));
    v->setProperty("fitted_ticks", ticks);
  }
}

// Fits a chart view's ticks again whenever the view is resized.
class TickFitter : public QObject {
 public:
  using QObject::QObject;
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() != QEvent::Resize) return false;
    auto* view = qobject_cast<QChartView*>(watched);
    if (!view || !view->chart()) return false;
    // The chart lays out after this event: its plot area keeps its share of the view's width.
    const auto* resize = static_cast<QResizeEvent*>(event);
    const double before = resize->oldSize().width(), plot = view->chart()->plotArea().width();
    fit_ticks(view, before > 0 && plot > 0 ? plot * resize->size().width() / before : 0.6 * resize->size().width());
    return false;
  }
};

void replace_chart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);
  delete old;
  fit_ticks(view);
}

// Horizontal bars: plan names (with their figure) on the left, where long labels fit; the first
// plan on top. Returns the category axis (index i = plan n-1-i).
QBarCategoryAxis* category_axis(QChart* chart, const QStringList& labels_top_down) {
  auto* categories = new QBarCategoryAxis;
  QStringList bottom_up = labels_top_down;
  std::reverse(bottom_up.begin(), bottom_up.end());
  categories->append(bottom_up);
  categories->setTruncateLabels(false);
  QFont small = categories->labelsFont();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  categories->setLabelsFont(small);
  chart->addAxis(categories, Qt::AlignLeft);
  return categories;
}

QValueAxis* value_axis(QChart* chart, const QString& title, double max) {
  auto* values = new QValueAxis;
  values->setTitleText(title);
  values->setRange(0, max > 0 ? max : 1);
  values->setProperty("data_max", max > 0 ? max : 1.0);
  values->applyNiceNumbers();
  values->setLabelFormat(label_format(values->max()));
  chart->addAxis(values, Qt::AlignBottom);
  return values;
}

// Short labels for chart categories: the plans' first words when those are short and distinct
// ("A", "B" of "A 32x H100 FSDP", ...), else "plan 1", "plan 2", ...
QStringList short_names(const std::vector<plan::Plan>& plans) {
  // A planner pick ("cheapest: 32x h100 ...") is named by what it was picked for.
  if (std::all_of(plans.begin(), plans.end(),
                  [](const plan::Plan& p) { return p.name.find(": ") != std::string::npos; })) {
    QStringList picks;
    for (const auto& p : plans) picks << q(p.name.substr(0, p.name.find(": ")));
    if (QSet<QString>(picks.begin(), picks.end()).size() == picks.size()) return picks;
  }
  QStringList first;
  for (const auto& p : plans) first << q(p.name).section(' ', 0, 0);
  const bool usable =
      std::all_of(first.begin(), first.end(), [](const QString& w) { return !w.isEmpty() && w.size() <= 8; }) &&
      QSet<QString>(first.begin(), first.end()).size() == first.size();
  if (usable) return first;
  QStringList numbered;
  for (std::size_t i = 0; i < plans.size(); ++i) numbered << QString("plan %1").arg(i + 1);
  return numbered;
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

// One tier's memory per plan, stacked by category, with each plan's capacity as a line across its
// bar: the bar's length is the figure judged for fit. `extra` adds named parts on top of the
// categories (allocator slack; other pipeline stages' share).
struct TierView {
  QString title;
  QString unit;      // "GiB" or "TB"
  double scale = 1;  // bytes per unit
  std::function<std::array<double, inventory::kCategories>(const evaluate::Evaluation&)> categories;
  std::vector<std::pair<QString, std::function<double(const evaluate::Evaluation&)>>> extra;
  std::function<double(const evaluate::Evaluation&)> total;     // judged for fit
  std::function<double(const evaluate::Evaluation&)> capacity;  // usable
  QString capacity_name;
};

// A mark across each plan's bar at x[i] (none where x[i] <= 0): its capacity, or its figure in
// the pinned baseline. One legend entry for all.
void add_marks(QChart* chart, QAbstractAxis* values, QAbstractAxis* categories, const std::vector<double>& x,
               const QString& name, const char* kind, const std::function<QPen(std::size_t)>& pen_of) {
  const std::size_t n = x.size();
  bool first = true;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(x[i] > 0)) continue;
    const double y = static_cast<double>(n - 1 - i);
    auto* line = new QLineSeries;
    line->setName(name);
    line->setProperty("plan", static_cast<int>(i));
    line->setProperty("kind", kind);
    line->append(x[i], y - 0.45);
    line->append(x[i], y + 0.45);
    line->setPen(pen_of(i));
    chart->addSeries(line);
    line->attachAxis(values);
    line->attachAxis(categories);
    if (!first)
      for (QLegendMarker* m : chart->legend()->markers(line)) m->setVisible(false);
    first = false;
  }
}

QPen pinned_pen() {
  QPen pen(QColor(0, 110, 200));
  pen.setWidth(2);
  pen.setStyle(Qt::DashLine);
  return pen;
}

QChart* tier_chart(const TierView& v, const std::vector<evaluate::Evaluation>& ev, const QStringList& names,
                   const std::vector<double>& pinned) {
  const std::size_t n = ev.size();
  // The key to the cross only where a plan carries one (a long title is clipped in a narrow pane).
  bool any_over = false;
  for (std::size_t i = 0; i < n; ++i) any_over = any_over || v.total(ev[i]) > v.capacity(ev[i]);
  QChart* chart = new_chart(any_over ? v.title + QString::fromUtf8(" \u2014 \u2717: over capacity") : v.title);
  // Room on the left for the plans' labels with their capacity share (Qt lays them out a few
  // pixels short of their width, clipping the first letter).
  chart->setMargins(QMargins(12, 4, 4, 4));
  QStringList labels;
  double max = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double total = v.total(ev[i]), cap = v.capacity(ev[i]);
    max = std::max({max, total / v.scale, cap / v.scale, pinned[i] / v.scale});
    // The figure by its bar with its share of the capacity, so that a nearly full tier reads as
    // such on an axis another plan's larger capacity sets (114.5 GiB of a 115.2 GiB host was a few
    // pixels beside a DGX's 1,843); a cross where it runs past the capacity (its line then red).
    QString label = names[static_cast<int>(i)] + QString("  %1").arg(total / v.scale, 0, 'f', 2);
    if (cap > 0 && !mutant("capacity_share_missing")) label += QString(" (%1%)").arg(100.0 * total / cap, 0, 'f', 0);
    if (total > cap && !mutant("over_capacity_cross_missing")) label += QString::fromUtf8(" \u2717");
    labels << label;
  }
  auto* series = new QHorizontalStackedBarSeries;
  // Bottom to top: the last plan first.
  for (int c = 0; c < inventory::kCategories; ++c) {
    auto* set = new QBarSet(inventory::to_string(static_cast<inventory::Category>(c)));
    set->setColor(mutant("category_colour_by_position")
                      ? category_color(static_cast<inventory::Category>(series->count()))
                      : category_color(static_cast<inventory::Category>(c)));
    bool any = false;
    for (std::size_t i = n; i-- > 0;) {
      const double b = v.categories(ev[i])[static_cast<std::size_t>(c)] / v.scale;
      any = any || b > 0;
      *set << b;
    }
    if (any || mutant("empty_categories_listed"))
      series->append(set);
    else
      delete set;
  }
  for (const auto& [name, part] : v.extra) {
    auto* set = new QBarSet(name);
    set->setColor(QColor(90, 90, 90));  // not a category: grey, apart from the palette
    bool any = false;
    for (std::size_t i = n; i-- > 0;) {
      const double b = std::max(0.0, part(ev[i])) / v.scale;
      any = any || b > 0;
      *set << b;
    }
    if (any)
      series->append(set);
    else
      delete set;
  }
  chart->addSeries(series);
  QBarCategoryAxis* categories = category_axis(chart, labels);
  QValueAxis* values = value_axis(chart, v.unit, 1.05 * max);
  series->attachAxis(categories);
  series->attachAxis(values);
  // Each plan's capacity: a line across its bar, red where the bar runs past it.
  std::vector<double> caps;
  for (const auto& e : ev) caps.push_back(v.capacity(e) / v.scale * (mutant("capacity_line_at_half") ? 0.5 : 1.0));
  if (mutant("capacity_line_missing")) caps.assign(caps.size(), 0.0);
  add_marks(chart, values, categories, caps, v.capacity_name, "capacity", [&](std::size_t i) {
    QPen pen(v.total(ev[i]) > v.capacity(ev[i]) && !mutant("over_capacity_line_not_red") ? QColor(200, 0, 0)
                                                                                         : QColor(20, 20, 20));
    pen.setWidth(3);
    return pen;
  });
  std::vector<double> was;
  for (double b : pinned) was.push_back(b / v.scale);
  if (!mutant("pinned_memory_marks_missing"))
    add_marks(chart, values, categories, was, "pinned baseline", "pinned", [](std::size_t) { return pinned_pen(); });
  chart->legend()->setAlignment(Qt::AlignRight);
  return chart;
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
  plan_box_ = new QGroupBox("Plan (edits are written into its text)");
  plan_box_->setObjectName("plan_box");
  auto* plan_form = new QFormLayout(plan_box_);
  const auto spin = [&](const char* name, int lo, int hi, const char* special = nullptr) {
    auto* b = new QSpinBox;
    b->setObjectName(name);
    b->setRange(lo, hi);
    if (special) b->setSpecialValueText(special);
    return b;
  };
  const auto combo = [&](const char* name, const std::vector<std::string>& items) {
    auto* c = new QComboBox;
    c->setObjectName(name);
    for (const auto& i : items) c->addItem(q(i));
    return c;
  };
  plan_pick_ = new QComboBox;
  plan_pick_->setObjectName("plan_pick");
  gpu_ = combo("gpu", catalog.gpu_names());
  node_ = combo("node", catalog.node_names());
  gpus_ = spin("gpus", 1, plan::kMaxGpus);
  tp_ = spin("tp", 1, 1024);
  pp_ = spin("pp", 1, 1024);
  dp_ = spin("dp", 0, plan::kMaxGpus, "auto");
  cp_ = spin("cp", 1, 1024);
  zero_ = spin("zero", 0, 3);
  offload_ = new QComboBox;
  offload_->setObjectName("offload");
  offload_->addItems(choices<plan::OffloadPreset>());
  offload_->setToolTip("Writes offload: {preset: ...}: the preset's placements replace any written by hand.");
  dram_ = spin("dram", 1, 1 << 20);
  dram_->setSuffix(" GiB");
  dram_->setToolTip("Host DRAM per node (cluster.dram)");
  // A node's devices of one kind: the catalog's names (or none) and how many.
  const auto device_row = [&](const char* name, std::vector<std::string> names, const char* tip, QComboBox*& pick,
                              QSpinBox*& count) {
    names.insert(names.begin(), "(none)");
    pick = combo(name, names);
    count = spin((std::string(name) + "_count").c_str(), 0, 64);
    count->setToolTip(tip);
    auto* row = new QHBoxLayout;
    row->addWidget(pick, 1);
    row->addWidget(new QLabel("×"));
    row->addWidget(count);
    return row;
  };
  auto* drive_row =
      device_row("drive", catalog.drive_names(), "Drives per node (cluster.drives)", drive_, drive_count_);
  auto* expander_row = device_row("expander", catalog.expander_names(),
                                  "CXL memory expanders per node (cluster.expanders)", expander_, expander_count_);
  auto* layout_row = new QHBoxLayout;
  for (auto [label, box] : {std::pair{"tp", tp_}, std::pair{"pp", pp_}, std::pair{"dp", dp_}, std::pair{"cp", cp_},
                            std::pair{"ZeRO", zero_}}) {
    layout_row->addWidget(new QLabel(label));
    layout_row->addWidget(box);
  }
  auto* gpu_row = new QHBoxLayout;
  gpu_row->addWidget(gpu_, 1);
  gpu_row->addWidget(new QLabel("×"));
  gpu_row->addWidget(gpus_);
  plan_form->addRow("plan", plan_pick_);
  plan_form->addRow("GPU", gpu_row);
  plan_form->addRow("node", node_);
  plan_form->addRow("layout", layout_row);
  plan_form->addRow("offload", offload_);
  plan_form->addRow("DRAM per node", dram_);
  plan_form->addRow("drives per node", drive_row);
  plan_form->addRow("CXL expanders per node", expander_row);
  plan_box_->setEnabled(false);
  connect(plan_pick_, &QComboBox::currentIndexChanged, this, [this] { fill_plan_controls(); });
  for (QComboBox* c : {gpu_, node_, offload_, drive_, expander_})
    connect(c, &QComboBox::activated, this, [this, c] { plan_control_changed(c); });
  for (QSpinBox* b : {gpus_, tp_, pp_, dp_, cp_, zero_, dram_, drive_count_, expander_count_}) {
    b->setKeyboardTracking(false);  // a value typed is written once, on Enter or leaving the box
    connect(b, &QSpinBox::valueChanged, this, [this, b] { plan_control_changed(b); });
  }

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
  left_layout->addWidget(plan_box_);
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
  auto* tick_fitter = new TickFitter(this);
  const auto chart_view = [tick_fitter](const char* name) {
    auto* v = new QChartView;
    v->setObjectName(name);
    v->installEventFilter(tick_fitter);
    v->setRenderHint(QPainter::Antialiasing);
    v->setMinimumHeight(280);
    return v;
  };
  time_chart_ = chart_view("time_chart");
  cost_chart_ = chart_view("cost_chart");
  memory_chart_ = chart_view("memory_chart");
  host_chart_ = chart_view("host_chart");
  nvme_chart_ = chart_view("nvme_chart");
  cxl_chart_ = chart_view("cxl_chart");
  search_chart_ = chart_view("search_chart");
  tabs_ = new QTabWidget;
  tabs_->setObjectName("tabs");
  auto* overview = new QWidget;
  auto* overview_layout = new QHBoxLayout(overview);
  overview_layout->setContentsMargins(0, 0, 0, 0);
  overview_layout->addWidget(time_chart_, 2);
  overview_layout->addWidget(cost_chart_, 2);
  overview_layout->addWidget(memory_chart_, 3);
  tabs_->addTab(overview, "Time, cost, GPU memory");
  auto* tiers = new QWidget;
  auto* tiers_layout = new QHBoxLayout(tiers);
  tiers_layout->setContentsMargins(0, 0, 0, 0);
  tiers_layout->addWidget(host_chart_);
  tiers_layout->addWidget(cxl_chart_);
  tiers_layout->addWidget(nvme_chart_);
  cxl_chart_->setVisible(false);
  tabs_->addTab(tiers, "Host DRAM and NVMe");
  tabs_->addTab(search_chart_, "Search");
  tabs_->setTabVisible(2, false);
  // One traced step of a chosen plan (timeline_panel.hpp), simulated only when the tab is looked at.
  timeline_ = new TimelinePanel;
  tabs_->addTab(timeline_, "Step timeline");
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int) {
    if (tabs_->currentWidget() == timeline_) timeline_->show_if_stale();
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
  below_layout->addWidget(verdict_);
  below_layout->addWidget(tabs_, 1);
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
  if (!catalog_.expanders.empty()) n.expander = catalog_.expanders.front().name;
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
  show_charts(o);
  show_search(o);
  std::vector<TimelinePanel::Shown> traced;
  for (std::size_t i = 0; i < o.plans.size(); ++i)
    traced.push_back(
        {o.plans[i], o.evaluations[i].feasible() ? std::string() : "does not fit (" + o.evaluations[i].reason() + ")"});
  timeline_->set_plans(o.scenario->model, std::move(traced));
  if (tabs_->currentWidget() == timeline_) timeline_->show_if_stale();
  {
    const int keep_plan = plan_pick_->currentIndex();
    const QSignalBlocker quiet(plan_pick_);
    plan_pick_->clear();
    for (const auto& p : o.scenario->plans) plan_pick_->addItem(q(p.name));
    plan_pick_->setCurrentIndex(keep_plan >= 0 && keep_plan < plan_pick_->count() ? keep_plan : 0);
  }
  fill_plan_controls();
}

int MainWindow::control_plan() const {
  const int i = plan_pick_->currentIndex();
  return shown_.scenario && i >= 0 && i < static_cast<int>(shown_.scenario->plans.size()) ? i : -1;
}

void MainWindow::fill_plan_controls() {
  const int i = control_plan();
  for (QWidget* w : std::initializer_list<QWidget*>{gpu_, node_, gpus_, tp_, pp_, dp_, cp_, zero_, offload_, dram_,
                                                    drive_, drive_count_, expander_, expander_count_})
    w->setEnabled(i >= 0);
  const bool none = shown_.scenario && shown_.scenario->plans.empty();
  plan_box_->setEnabled(shown_.scenario && !none);
  plan_box_->setTitle(none ? "Plan (the text has none: click a point in the Search tab to add one)"
                           : "Plan (edits are written into its text)");
  if (i < 0) return;
  const plan::Plan& p = shown_.scenario->plans[static_cast<std::size_t>(i)];
  const QSignalBlocker a(gpu_), b(node_), c(gpus_), d(tp_), e(pp_), f(dp_), g(cp_), h(zero_), k(offload_), l(dram_),
      m(drive_), n(drive_count_), o(expander_), r(expander_count_);
  gpu_->setCurrentText(q(p.cluster.gpu.name));
  node_->setCurrentText(q(p.cluster.node.name));
  gpus_->setValue(p.cluster.gpus());
  tp_->setValue(p.parallel.tp);
  pp_->setValue(p.parallel.pp);
  dp_->setValue(p.parallel.dp);
  cp_->setValue(p.parallel.cp);
  zero_->setValue(p.parallel.zero);
  offload_->setCurrentText(plan::to_string(p.offload.preset));
  dram_->setValue(static_cast<int>(std::lround(p.cluster.host.dram_bytes / kGiB)));
  const auto show = [](const auto& devices, QComboBox* pick, QSpinBox* count) {
    pick->setCurrentIndex(devices.empty() ? 0 : std::max(0, pick->findText(q(devices.front().first.name))));
    count->setValue(devices.empty() ? 0 : devices.front().second);
  };
  show(p.cluster.drives, drive_, drive_count_);
  show(p.cluster.expanders, expander_, expander_count_);
}

// A control's new value, as the plan's keys (docs/scenario-format.md).
void MainWindow::plan_control_changed(QObject* control) {
  const int i = control_plan();
  if (i < 0) return;
  const auto n = [](const QSpinBox* b) { return std::to_string(b->value()); };
  std::vector<io::PlanKey> keys;
  if (control == gpu_)
    keys = {{"cluster.gpu", gpu_->currentText().toStdString()}};
  else if (control == node_)
    keys = {{"cluster.node", node_->currentText().toStdString()}};
  else if (control == gpus_)
    keys = {{"cluster.gpus", n(gpus_)}};
  else if (control == tp_)
    keys = {{"parallel.tp", n(tp_)}};
  else if (control == pp_)
    keys = {{"parallel.pp", n(pp_)}};
  else if (control == dp_)
    keys = {{"parallel.dp", dp_->value() == 0 ? std::string() : n(dp_)}};  // auto: no key
  else if (control == cp_)
    keys = {{"parallel.cp", n(cp_)}};
  else if (control == zero_)
    keys = {{"parallel.zero", n(zero_)}};
  else if (control == offload_)
    keys = {{"offload", "{preset: " + offload_->currentText().toStdString() + "}"}};
  else if (control == dram_)
    keys = {{"cluster.dram", n(dram_) + " GiB"}};
  // A device row: its list of one {kind: name, count: n} (a name picked with a count of 0 gets 1).
  const auto devices = [&](const char* key, const char* kind, QComboBox* pick, QSpinBox* count) {
    if (control == pick && pick->currentIndex() > 0 && count->value() == 0) {
      const QSignalBlocker quiet(count);
      count->setValue(1);
    }
    return std::vector<io::PlanKey>{
        {key, pick->currentIndex() == 0 || count->value() == 0
                  ? std::string("[]")
                  : fmt::format("[{{{}: {}, count: {}}}]", kind, pick->currentText().toStdString(), count->value())}};
  };
  if (control == drive_ || control == drive_count_)
    keys = devices("cluster.drives", "drive", drive_, drive_count_);
  else if (control == expander_ || control == expander_count_)
    keys = devices("cluster.expanders", "expander", expander_, expander_count_);
  if (keys.empty() || !set_plan_keys(i, keys)) fill_plan_controls();  // back to what the text says
}

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
  std::vector<std::pair<const char*, QChartView*>> charts = {{"job-time", time_chart_},
                                                             {"cost", cost_chart_},
                                                             {"gpu-memory", memory_chart_},
                                                             {"host-memory", host_chart_},
                                                             {"nvme", nvme_chart_}};
  if (!cxl_chart_->isHidden()) charts.emplace_back("cxl-memory", cxl_chart_);
  if (shown_.search) charts.emplace_back("search", search_chart_);
  if (mutant("chart_export_skips_cost")) charts.erase(charts.begin() + 1);
  const bool svg = file.extension() == ".svg";
#if !FTPLAN_GUI_SVG
  if (svg) {
    QMessageBox::warning(this, "ftplan", "This ftplan-gui was built without Qt Svg: export charts as .png.");
    return {};
  }
#endif
  std::vector<std::filesystem::path> written;
  for (auto [name, view] : charts) {
    if (!view->chart() || view->chart()->series().isEmpty()) continue;
    // A chart on a tab not shown yet has no size of its own: render it at a readable one.
    const QSize size = view->isVisible() ? view->size() : QSize(900, 500);
    if (!view->isVisible()) view->resize(size);
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    if (svg) {
#if FTPLAN_GUI_SVG
      QSvgGenerator generator;
      generator.setOutputDevice(&buffer);
      generator.setSize(size);
      generator.setViewBox(QRect(QPoint(0, 0), size));
      generator.setTitle(view->chart()->title());
      QPainter painter(&generator);
      view->render(&painter);
      painter.end();
#endif
    } else if (!view->grab().save(&buffer, "PNG")) {
      continue;
    }
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
  table_split_->setSizes({height, std::max(0, table_split_->height() - height)});
}

void MainWindow::show_charts(const Outcome& o) {
  const std::vector<plan::Plan>& plans = o.plans;
  const auto& ev = o.evaluations;
  const QStringList names = short_names(plans);
  const std::size_t n = plans.size();
  // Each shown plan's figure in the pinned baseline (a plan of the same name that ran there), else 0.
  const auto pinned_of = [&](const std::function<double(const evaluate::Evaluation&)>& figure) {
    std::vector<double> out(n, 0.0);
    if (!pinned_) return out;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < pinned_->plans.size(); ++j)
        if (pinned_->plans[j].name == plans[i].name && pinned_->evaluations[j].feasible())
          out[i] = figure(pinned_->evaluations[j]);
    return out;
  };

  // Job time on a log axis (51.7 min beside 3.5 d), each bar labelled; a plan that does not fit has none.
  {
    QChart* chart = new_chart("Job time (hours, log scale)");
    auto* set = new QBarSet("job time");
    QStringList labels;
    double lo = 0, hi = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& e = ev[i];
      labels << names[static_cast<int>(i)] + "  " +
                    (mutant("job_time_labels_missing") ? QString()
                     : e.feasible()                    ? q(ftplan::format_duration(e.cost.job_time_s))
                                                       : "does not fit");
      if (!e.feasible() || e.cost.job_time_s <= 0) continue;
      const double h = e.cost.job_time_s / 3600;
      lo = lo > 0 ? std::min(lo, h) : h;
      hi = std::max(hi, h);
    }
    // Whole decades around the figures, the shortest bar a visible length.
    const double min = std::pow(10.0, std::floor(std::log10(lo > 0 ? lo : 1)) - 1);
    double max = std::pow(10.0, std::ceil(std::log10(hi > 0 ? hi : 1) + 0.01));
    if (pinned_)
      for (double h : pinned_of([](const evaluate::Evaluation& e) { return e.cost.job_time_s / 3600; }))
        if (h > max) max = std::pow(10.0, std::ceil(std::log10(h) + 0.01));
    // A log axis has no 0: a plan without a time gets a bar of no length, from the axis' start.
    for (std::size_t k = n; k-- > 0;) {
      const std::size_t i = mutant("job_time_bars_swapped") ? n - 1 - k : k;
      *set << (ev[i].feasible() && ev[i].cost.job_time_s > 0 ? ev[i].cost.job_time_s / 3600 : min);
    }
    auto* series = new QHorizontalBarSeries;
    series->append(set);
    chart->addSeries(series);
    QBarCategoryAxis* categories = category_axis(chart, labels);
    QAbstractAxis* values = nullptr;
    if (mutant("job_time_linear_axis")) {
      values = value_axis(chart, "h", max);
    } else {
      auto* log = new QLogValueAxis;
      log->setTitleText("h");
      log->setBase(10);
      log->setRange(min, max);
      log->setLabelFormat(min >= 1 ? "%.0f" : "%g");
      log->setMinorTickCount(-1);
      chart->addAxis(log, Qt::AlignBottom);
      values = log;
    }
    series->attachAxis(categories);
    series->attachAxis(values);
    const auto was = pinned_of([](const evaluate::Evaluation& e) { return e.cost.job_time_s / 3600; });
    add_marks(chart, values, categories, was, "pinned baseline", "pinned", [](std::size_t) { return pinned_pen(); });
    // The legend only when there is a baseline to name.
    for (QLegendMarker* m : chart->legend()->markers(series)) m->setVisible(false);
    chart->legend()->setVisible(std::any_of(was.begin(), was.end(), [](double h) { return h > 0; }));
    replace_chart(time_chart_, chart);
  }
  // Dollars: hardware, energy and flash wear, the total by each bar.
  {
    QChart* chart = new_chart("Cost ($)");
    auto* hw = new QBarSet("hardware");
    auto* energy = new QBarSet("energy");
    auto* wear = new QBarSet("flash wear");
    QStringList labels;
    double max = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const bool ok = ev[i].feasible();
      labels << names[static_cast<int>(i)] + "  " + (ok ? q(present::cost_text(ev[i].cost)) : "does not fit");
      if (ok && ev[i].cost.priced()) max = std::max(max, ev[i].cost.cost_usd);
    }
    for (std::size_t i = n; i-- > 0;) {
      const bool ok = (ev[i].feasible() || mutant("cost_bar_for_unfit_plan")) &&
                      ev[i].cost.priced();  // no bar for a plan without a price
      *hw << (ok ? (mutant("cost_parts_swapped") ? ev[i].cost.energy_usd : ev[i].cost.hardware_usd) : 0.0);
      *energy << (ok ? (mutant("cost_parts_swapped") ? ev[i].cost.hardware_usd : ev[i].cost.energy_usd) : 0.0);
      *wear << (ok ? ev[i].cost.wear_usd : 0.0);
    }
    auto* series = new QHorizontalStackedBarSeries;
    series->append({hw, energy, wear});
    chart->addSeries(series);
    // A part no plan pays (energy in a rented price, wear without flash) has no legend entry:
    // three entries do not fit the narrow chart's one legend row, and a swatch for nothing reads
    // as a cost.
    for (QBarSet* part : {hw, energy, wear}) {
      bool any = false;
      for (int i = 0; i < part->count(); ++i) any = any || part->at(i) > 0;
      for (QLegendMarker* m : chart->legend()->markers(series))
        if (auto* bm = qobject_cast<QBarLegendMarker*>(m); bm && bm->barset() == part)
          m->setVisible(any || mutant("cost_legend_lists_unpaid"));
    }
    QBarCategoryAxis* categories = category_axis(chart, labels);
    const auto was = pinned_of([](const evaluate::Evaluation& e) { return e.cost.cost_usd; });
    for (double usd : was) max = std::max(max, usd);
    QValueAxis* values = value_axis(chart, "$", 1.05 * max);
    series->attachAxis(categories);
    series->attachAxis(values);
    add_marks(chart, values, categories, was, "pinned baseline", "pinned", [](std::size_t) { return pinned_pen(); });
    replace_chart(cost_chart_, chart);
  }
  // Memory per tier: the figure judged for fit, against each plan's capacity.
  using Cats = std::array<double, inventory::kCategories>;
  {
    TierView gpu;
    gpu.title = "Peak memory per GPU (GiB)";
    gpu.unit = "GiB";
    gpu.scale = kGiB;
    gpu.categories = [](const evaluate::Evaluation& e) -> Cats { return e.memory.gpu().bytes; };
    // The caching allocator's slack: what fit is judged on (nvidia-smi's view) beyond the live tensors.
    if (!mutant("allocator_slack_missing"))
      gpu.extra.emplace_back("allocator slack", [](const evaluate::Evaluation& e) {
        return e.memory.gpu_reserved_peak_bytes - e.memory.gpu_allocated_peak_bytes;
      });
    gpu.total = [](const evaluate::Evaluation& e) { return e.memory.gpu_peak_bytes(); };
    gpu.capacity = [](const evaluate::Evaluation& e) { return e.memory.gpu_capacity_bytes(); };
    gpu.capacity_name = "usable per GPU";
    replace_chart(memory_chart_, tier_chart(gpu, ev, names, pinned_of(gpu.total)));
  }
  // A node tier's chart: its categories, the node's ranks of the most demanding pipeline stage
  // beyond them (footprint: an upper bound), its peak and capacity.
  const auto node_tier = [](plan::Tier t, QString title, QString unit, double scale, QString capacity_name) {
    TierView v;
    v.title = std::move(title);
    v.unit = std::move(unit);
    v.scale = scale;
    v.categories = [t](const evaluate::Evaluation& e) -> Cats { return e.memory.bytes(t).bytes; };
    v.total = [t](const evaluate::Evaluation& e) { return e.memory.peak(t); };
    v.capacity = [t](const evaluate::Evaluation& e) { return e.memory.capacity(t); };
    v.capacity_name = std::move(capacity_name);
    return v;
  };
  const auto other_stages = [](plan::Tier t) {
    return std::make_pair(QString("other stages"),
                          std::function<double(const evaluate::Evaluation&)>([t](const evaluate::Evaluation& e) {
                            return e.memory.peak(t) - e.memory.bytes(t).total();
                          }));
  };
  {
    TierView host = node_tier(plan::Tier::cpu, "Peak host DRAM per node (GiB)", "GiB", kGiB, "usable per node");
    if (!mutant("host_other_stages_missing")) host.extra.push_back(other_stages(plan::Tier::cpu));
    if (mutant("host_capacity_halved"))
      host.capacity = [](const evaluate::Evaluation& e) { return 0.5 * e.memory.capacity(plan::Tier::cpu); };
    replace_chart(host_chart_, tier_chart(host, ev, names, pinned_of(host.total)));
  }
  {
    TierView nvme = node_tier(plan::Tier::nvme, "NVMe flash per node (TB)", "TB", mutant("nvme_in_gb") ? 1e9 : 1e12,
                              "capacity per node");
    nvme.extra.push_back(other_stages(plan::Tier::nvme));
    replace_chart(nvme_chart_, tier_chart(nvme, ev, names, pinned_of(nvme.total)));
  }
  // CXL memory, where a plan's node has expanders (or places state there, to show it does not fit).
  const bool any_cxl = std::any_of(ev.begin(), ev.end(), [](const evaluate::Evaluation& e) {
    return e.memory.capacity(plan::Tier::cxl) > 0 || e.memory.peak(plan::Tier::cxl) > 0;
  });
  cxl_chart_->setVisible(any_cxl);
  tabs_->setTabText(1, any_cxl ? "Host DRAM, CXL memory and NVMe" : "Host DRAM and NVMe");
  if (any_cxl) {
    TierView cxl = node_tier(plan::Tier::cxl, "Peak CXL memory per node (GiB)", "GiB", kGiB, "capacity per node");
    cxl.extra.push_back(other_stages(plan::Tier::cxl));
    replace_chart(cxl_chart_, tier_chart(cxl, ev, names, pinned_of(cxl.total)));
  }
}

// The planner's whole search: every simulated layout by job time and dollars, the Pareto front
// (time, $, peak power) and the picks over them, and the deadline and budget as lines. Hover a
// point for its figures.
void MainWindow::show_search(const Outcome& o) {
  tabs_->setTabVisible(2, o.search != nullptr && !mutant("search_tab_hidden"));
  if (!o.search) return;
  QChart* chart = new_chart("Searched plans: job time vs cost");
  const planner::Result& r = *o.search;
  auto* all = new QScatterSeries;
  all->setName("meets the constraints");
  all->setMarkerSize(6);
  all->setColor(QColor(120, 150, 200));
  auto* out = new QScatterSeries;
  out->setName("misses them");
  out->setMarkerSize(6);
  out->setColor(QColor(190, 190, 190));
  auto* front = new QScatterSeries;
  front->setName("Pareto front");
  front->setMarkerSize(9);
  front->setColor(QColor(200, 40, 40));
  // The front's points that miss the deadline or budget: on the front, but no choice (marked as
  // the front, they read as candidates).
  auto* front_out = new QScatterSeries;
  front_out->setName("Pareto front, misses the constraints");
  front_out->setMarkerSize(9);
  front_out->setColor(QColor(235, 190, 190));
  front_out->setBorderColor(QColor(200, 40, 40));
  auto* picks = new QScatterSeries;
  picks->setName("picks (table columns)");
  picks->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  picks->setMarkerSize(13);
  picks->setColor(QColor(0, 0, 0, 0));
  picks->setBorderColor(QColor(0, 120, 0));
  // For hover (the figures) and click (the candidate added as a plan).
  struct Point {
    QPointF at;
    QString text;
    int candidate;
  };
  auto shared = std::make_shared<std::vector<Point>>();
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  const int picked[] = {r.fastest, r.cheapest, r.lowest_power, r.fewest_gpus};
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    const auto& e = c.evaluation;
    if (!e.feasible() || !e.cost.priced() || e.cost.job_time_s <= 0 || e.cost.cost_usd <= 0) continue;
    const QPointF p(e.cost.job_time_s / 3600, e.cost.cost_usd);
    x_lo = x_lo > 0 ? std::min(x_lo, p.x()) : p.x();
    y_lo = y_lo > 0 ? std::min(y_lo, p.y()) : p.y();
    x_hi = std::max(x_hi, p.x());
    y_hi = std::max(y_hi, p.y());
    if (std::find(r.pareto.begin(), r.pareto.end(), static_cast<int>(i)) != r.pareto.end())
      *(c.meets_constraints || mutant("search_front_misses_marked_as_front") ? front : front_out) << p;
    else if (c.meets_constraints)
      *all << p;
    else
      *out << p;
    if (std::find(std::begin(picked), std::end(picked), static_cast<int>(i)) != std::end(picked) &&
        !mutant("search_picks_missing"))
      *picks << p;
    shared->push_back(Point{p,
                            q(fmt::format("{}\n{}, {}, {:.1f} kW peak, {} GPU memory{}", c.plan.name,
                                          ftplan::format_duration(e.cost.job_time_s), present::money(e.cost.cost_usd),
                                          e.power.peak_power_w / 1e3, ftplan::format_bytes(e.memory.gpu_peak_bytes()),
                                          c.meets_constraints ? "" : "\n(misses the constraints)")),
                            static_cast<int>(i)});
  }
  const plan::Constraints& k = o.scenario->constraints;
  if (k.deadline_s > 0) {
    x_lo = std::min(x_lo > 0 ? x_lo : k.deadline_s / 3600, k.deadline_s / 3600);
    x_hi = std::max(x_hi, k.deadline_s / 3600);
  }
  if (k.budget_usd > 0) {
    y_lo = std::min(y_lo > 0 ? y_lo : k.budget_usd, k.budget_usd);
    y_hi = std::max(y_hi, k.budget_usd);
  }
  auto* x = new QLogValueAxis;
  x->setTitleText("job time (h)");
  x->setLabelFormat("%g");
  auto* y = new QLogValueAxis;
  y->setTitleText("cost ($)");
  y->setLabelFormat("%.0f");
  const double xmin = x_lo > 0 ? std::pow(10.0, std::floor(std::log10(x_lo))) : 0.1;
  const double xmax = x_hi > 0 ? std::pow(10.0, std::ceil(std::log10(x_hi) + 0.01)) : 10;
  const double ymin = y_lo > 0 ? std::pow(10.0, std::floor(std::log10(y_lo))) : 1;
  const double ymax = y_hi > 0 ? std::pow(10.0, std::ceil(std::log10(y_hi) + 0.01)) : 10;
  x->setRange(xmin, xmax);
  y->setRange(ymin, ymax);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QScatterSeries* series : {out, all, front_out, front, picks}) {
    chart->addSeries(series);
    series->attachAxis(x);
    series->attachAxis(y);
    connect(series, &QScatterSeries::hovered, this, [shared](const QPointF& point, bool state) {
      if (!state) return;
      for (const auto& p : *shared)
        if (p.at == point) QToolTip::showText(QCursor::pos(), p.text + "\n(click: add it to the text as a plan)");
    });
    connect(series, &QScatterSeries::clicked, this, [this, shared](const QPointF& point) {
      for (const auto& p : *shared)
        if (p.at == point) {
          add_candidate(p.candidate);
          return;
        }
    });
  }
  // The constraints as lines: a plan left of the deadline and under the budget meets them.
  const auto limit = [&](const QString& name, QPointF a, QPointF b, QColor color) {
    if (mutant("constraint_lines_missing")) return;
    auto* line = new QLineSeries;
    line->setName(name);
    line->append(a);
    line->append(b);
    QPen pen(color);
    pen.setWidth(2);
    pen.setStyle(Qt::DashLine);
    line->setPen(pen);
    chart->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
  };
  if (k.deadline_s > 0)
    limit(q("deadline " + ftplan::format_duration(k.deadline_s)), {k.deadline_s / 3600, ymin},
          {k.deadline_s / 3600, ymax}, QColor(200, 120, 0));
  if (k.budget_usd > 0)
    limit(q("budget " + present::money(k.budget_usd)), {xmin, k.budget_usd}, {xmax, k.budget_usd}, QColor(120, 0, 160));
  if (k.peak_power_w > 0)
    chart->setTitle(chart->title() +
                    q(fmt::format(" (peak power limit {:.1f} kW: grey points miss it)", k.peak_power_w / 1e3)));
  replace_chart(search_chart_, chart);
}

}  // namespace ftplan::gui
