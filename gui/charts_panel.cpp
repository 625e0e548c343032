#include "charts_panel.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <functional>
#include <memory>

#include <QBarCategoryAxis>
#include <QBarLegendMarker>
#include <QBarSet>
#include <QBuffer>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QHBoxLayout>
#include <QHorizontalBarSeries>
#include <QHorizontalStackedBarSeries>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QResizeEvent>
#include <QScatterSeries>
#include <QSet>
#include <QStackedBarSeries>
#include <QTabBar>
#include <QToolTip>
#include <QValueAxis>
#if FTPLAN_GUI_SVG
#include <QSvgGenerator>
#endif

#include <fmt/format.h>

#include "common/strings.hpp"
#include "common/units.hpp"
#include "inventory/inventory.hpp"
#include "mutants.hpp"
#include "present/verdict.hpp"
#include "words.hpp"

namespace ftplan::gui {

namespace {

// One colour per memory category, the same in every chart, scenario and edit (Tableau 10's, each
// dark enough to read on white). Taken by position from the theme, a colour moved whenever a
// category was empty: blue was weights in the GPU chart and activations in the host chart beside
// it, and "buffers" and "overhead" came out near-white.
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

// A node tier's chart in words: its title, axis unit and scale, the capacity line's name and the
// exported file's name. The tiers of today have theirs here; a tier without a row gets them from
// plan::kTiers (its label and row), so a new tier is charted without a line here.
struct TierWords {
  std::string title, unit;
  double scale;
  std::string capacity, file;
};
TierWords tier_words(plan::Tier t) {
  switch (t) {
    case plan::Tier::cpu: return {"Peak host DRAM per node (GiB)", "GiB", kGiB, "usable per node", "host-memory"};
    case plan::Tier::nvme: return {"NVMe flash per node (TB)", "TB", 1e12, "capacity per node", "nvme"};
    default: {
      const plan::TierInfo& info = plan::tier_info(t);
      std::string label = info.label;
      if (!label.empty() && std::islower(static_cast<unsigned char>(label[0])))
        label[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(label[0])));
      return {fmt::format("Peak {} per node (GiB)", label), "GiB", kGiB, "capacity per node",
              fmt::format("{}-memory", info.row)};
    }
  }
}

// The node tiers' tab, named for the tiers shown: "Host DRAM, CXL memory and NVMe".
QString tiers_tab(const std::vector<std::string>& labels) {
  std::string tab = labels.empty() ? std::string() : labels.back();
  if (labels.size() > 1) tab = join(std::vector<std::string>(labels.begin(), labels.end() - 1), ", ") + " and " + tab;
  if (!tab.empty()) tab[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(tab[0])));
  return q(tab);
}

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
    if (auto* log = qobject_cast<QLogValueAxis*>(a)) {
      // Every decade labelled where they fit, every second one where they do not (the job-time
      // chart at 1280 x 720 ran "10" and "100" together into "10100").
      const double decades = log->min() > 0 ? std::log10(log->max() / log->min()) : 0;
      const bool every_second = decades + 1 > ticks && decades >= 2;
      log->setBase(every_second ? 100 : 10);
      log->setMinorTickCount(every_second ? 0 : -1);  // base 100's own minor ticks would be 98 a step
      continue;
    }
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

ChartsPanel::ChartsPanel(QWidget* parent) : QTabWidget(parent) {
  auto* tick_fitter = new TickFitter(this);
  const auto chart_view = [tick_fitter](const char* name) {
    auto* v = new QChartView;
    v->setObjectName(name);
    v->installEventFilter(tick_fitter);
    v->setRenderHint(QPainter::Antialiasing);
    v->setMinimumHeight(250);
    return v;
  };
  time_chart_ = chart_view("time_chart");
  cost_chart_ = chart_view("cost_chart");
  memory_chart_ = chart_view("memory_chart");
  for (const plan::TierInfo& t : plan::kTiers)
    if (t.tier != plan::Tier::gpu)
      tier_charts_.emplace_back(t.tier, chart_view(fmt::format("{}_chart", t.row).c_str()));
  search_chart_ = chart_view("search_chart");
  setObjectName("tabs");
  auto* overview = new QWidget;
  auto* overview_layout = new QHBoxLayout(overview);
  overview_layout->setContentsMargins(0, 0, 0, 0);
  overview_layout->addWidget(time_chart_, 2);
  overview_layout->addWidget(cost_chart_, 2);
  overview_layout->addWidget(memory_chart_, 3);
  addTab(overview, "Time, cost, GPU memory");
  auto* tiers = new QWidget;
  auto* tiers_layout = new QHBoxLayout(tiers);
  tiers_layout->setContentsMargins(0, 0, 0, 0);
  std::vector<std::string> always;
  for (auto [tier, view] : tier_charts_) {
    tiers_layout->addWidget(view);
    view->setVisible(plan::tier_info(tier).always);
    if (plan::tier_info(tier).always) always.push_back(plan::tier_info(tier).label);
  }
  addTab(tiers, tiers_tab(always));
  addTab(search_chart_, "Search");
  setTabVisible(2, false);
  // The charts' own minimum with the tab bar, which a QTabWidget's size hint leaves out: without
  // it a short window (1280 x 720) cut the charts' axes and legends off below, not the table above.
  setMinimumHeight(time_chart_->minimumHeight() + tabBar()->sizeHint().height());
}

void ChartsPanel::show_outcome(const Outcome& shown, const Outcome* pinned) {
  show_charts(shown, pinned);
  show_search(shown);
}

std::vector<std::pair<std::string, QByteArray>> ChartsPanel::render(bool svg) {
  std::vector<std::pair<std::string, QChartView*>> charts = {
      {"job-time", time_chart_}, {"cost", cost_chart_}, {"gpu-memory", memory_chart_}};
  // The node tiers' in the order they were first exported (host DRAM, NVMe, then those a plan may lack).
  for (bool always : {true, false})
    for (auto [tier, view] : tier_charts_)
      if (plan::tier_info(tier).always == always && !view->isHidden()) charts.emplace_back(tier_words(tier).file, view);
  if (search_shown_) charts.emplace_back("search", search_chart_);
  if (mutant("chart_export_skips_cost")) charts.erase(charts.begin() + 1);
  std::vector<std::pair<std::string, QByteArray>> out;
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
    out.emplace_back(name, bytes);
  }
  return out;
}

void ChartsPanel::show_charts(const Outcome& o, const Outcome* pinned) {
  const std::vector<plan::Plan>& plans = o.plans;
  const auto& ev = o.evaluations;
  const QStringList names = short_names(plans);
  const std::size_t n = plans.size();
  // Each shown plan's figure in the pinned baseline (a plan of the same name that ran there), else 0.
  const auto pinned_of = [&](const std::function<double(const evaluate::Evaluation&)>& figure) {
    std::vector<double> out(n, 0.0);
    if (!pinned) return out;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < pinned->plans.size(); ++j)
        if (pinned->plans[j].name == plans[i].name && pinned->evaluations[j].feasible())
          out[i] = figure(pinned->evaluations[j]);
    return out;
  };

  // Job time on a log axis (51.7 min beside 3.5 d), each bar labelled; a plan that does not fit has none.
  {
    QChart* chart = new_chart("Job time (h, log scale)");
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
    if (pinned)
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
  // Each node tier's chart; one a plan may lack where some plan's node has it (or places state
  // there, to show it does not fit). The tab names those shown.
  std::vector<std::string> shown;
  for (auto [tier, view] : tier_charts_) {
    const plan::TierInfo& info = plan::tier_info(tier);
    const bool any = info.always || std::any_of(ev.begin(), ev.end(), [t = tier](const evaluate::Evaluation& e) {
                       return e.memory.capacity(t) > 0 || e.memory.peak(t) > 0;
                     });
    view->setVisible(any);
    if (!any) continue;
    shown.push_back(info.label);
    const TierWords words = tier_words(tier);
    const bool nvme_in_gb = tier == plan::Tier::nvme && mutant("nvme_in_gb");
    TierView v = node_tier(tier, q(words.title), q(words.unit), nvme_in_gb ? 1e9 : words.scale, q(words.capacity));
    if (!(tier == plan::Tier::cpu && mutant("host_other_stages_missing"))) v.extra.push_back(other_stages(tier));
    if (tier == plan::Tier::cpu && mutant("host_capacity_halved"))
      v.capacity = [](const evaluate::Evaluation& e) { return 0.5 * e.memory.capacity(plan::Tier::cpu); };
    replace_chart(view, tier_chart(v, ev, names, pinned_of(v.total)));
  }
  setTabText(1, tiers_tab(shown));
}

// The planner's whole search: every simulated layout by job time and dollars, the Pareto front
// (time, $, peak power) and the picks over them, and the deadline and budget as lines. Hover a
// point for its figures.
void ChartsPanel::show_search(const Outcome& o) {
  search_shown_ = o.search != nullptr;
  setTabVisible(2, search_shown_ && !mutant("search_tab_hidden"));
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
          emit candidate_clicked(p.candidate);
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
