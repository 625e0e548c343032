// The desktop planner's window under Qt Test, off screen (QT_QPA_PLATFORM=offscreen): what it
// shows for each example scenario (table cells, chart series and their values), a knob edit
// evaluated on the worker thread, every error listed and every line marked, and closing during a
// search. Saves a screenshot of each example scenario, each tab, under FTPLAN_SCREENSHOT_DIR.
#include <cmath>
#include <map>
#include <set>

#include <QtTest/QtTest>

#include <QAbstractBarSeries>
#include <QBarCategoryAxis>
#include <QBarLegendMarker>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QListWidget>
#include <QLogValueAxis>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QScatterSeries>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QToolTip>
#include <QValueAxis>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>

#include "common/units.hpp"
#include "gui/main_window.hpp"
#include "gui/sweep_window.hpp"
#include "gui/timeline_view.hpp"
#include "io/catalog_io.hpp"
#include "io/model_io.hpp"
#include "present/verdict.hpp"

using ftplan::gui::MainWindow;
namespace fs = std::filesystem;

namespace {

constexpr double kGiB = 1u << 30;

int row_of(const QTableWidget* t, const QString& name) {
  for (int r = 0; r < t->rowCount(); ++r)
    if (t->verticalHeaderItem(r) && t->verticalHeaderItem(r)->text() == name) return r;
  return -1;
}

QString cell(const QTableWidget* t, const QString& row, int column) {
  const int r = row_of(t, row);
  if (r < 0 || !t->item(r, column)) return "<none>";
  return t->item(r, column)->text();
}

// The stacked bar's total for plan i (bars are listed bottom-up: the last plan first).
double bar_total(const QChartView* view, std::size_t plan, std::size_t plans) {
  for (QAbstractSeries* s : view->chart()->series())
    if (auto* bars = qobject_cast<QHorizontalStackedBarSeries*>(s)) {
      double total = 0;
      for (QBarSet* set : bars->barSets()) total += set->at(static_cast<int>(plans - 1 - plan));
      return total;
    }
  return -1;
}

// The capacity line (or the pinned baseline's mark) drawn across plan i's bar (its x), or -1 when there is none.
double capacity_line(const QChartView* view, std::size_t plan, const QString& kind = "capacity") {
  for (QAbstractSeries* s : view->chart()->series())
    if (auto* line = qobject_cast<QLineSeries*>(s);
        line && line->property("kind").toString() == kind && line->property("plan").toInt() == static_cast<int>(plan))
      return line->at(0).x();
  return -1;
}

// The value of the bar set labelled `label` for plan i (bars bottom-up: the last plan first); NaN
// when the chart has no such set.
double bar_value(const QChartView* view, const QString& label, std::size_t plan, std::size_t plans) {
  for (QAbstractSeries* s : view->chart()->series())
    if (auto* bars = qobject_cast<QAbstractBarSeries*>(s))
      for (QBarSet* set : bars->barSets())
        if (set->label() == label) return set->at(static_cast<int>(plans - 1 - plan));
  return std::nan("");
}

// The category axis' label of plan i (bottom-up, as the bars).
QString bar_label(const QChartView* view, std::size_t plan, std::size_t plans) {
  for (QAbstractAxis* axis : view->chart()->axes())
    if (auto* c = qobject_cast<QBarCategoryAxis*>(axis))
      if (c->categories().size() == static_cast<int>(plans)) return c->categories()[static_cast<int>(plans - 1 - plan)];
  return "<none>";
}

// The line series of `kind` across plan i's bar.
QLineSeries* mark(const QChartView* view, std::size_t plan, const QString& kind = "capacity") {
  for (QAbstractSeries* s : view->chart()->series())
    if (auto* line = qobject_cast<QLineSeries*>(s);
        line && line->property("kind").toString() == kind && line->property("plan").toInt() == static_cast<int>(plan))
      return line;
  return nullptr;
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<ftplan::model::Zoo> zoo_;
  std::unique_ptr<ftplan::hardware::Catalog> catalog_;
  std::map<QString, QColor> category_colors_;  // each memory category's colour, over every chart seen

  std::unique_ptr<MainWindow> window() {
    auto w = std::make_unique<MainWindow>(*zoo_, *catalog_);
    w->resize(1600, 1000);
    w->show();
    return w;
  }

 private slots:
  void initTestCase() {
    // QSettings (the recent files) in a test location, not the user's.
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("ftplan-test");
    QCoreApplication::setApplicationName("ftplan-gui-test");
    QSettings().remove("recent");
    zoo_ = std::make_unique<ftplan::model::Zoo>(ftplan::io::load_zoo(FTPLAN_ZOO_DIR));
    catalog_ = std::make_unique<ftplan::hardware::Catalog>(ftplan::io::load_catalog(FTPLAN_ZOO_DIR));
    fs::create_directories(FTPLAN_SCREENSHOT_DIR);
  }

  void example_scenario_data() {
    QTest::addColumn<QString>("file");
    for (const auto& entry : fs::directory_iterator(FTPLAN_SCENARIOS_DIR)) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() != ".yaml" || name.rfind("sweep-", 0) == 0) continue;  // sweeps are not scenarios
      QTest::newRow(name.c_str()) << QString::fromStdString(entry.path().string());
    }
  }

  // Each example: the table is compare's, the charts chart the figures judged for fit, the
  // answer is on top; then a screenshot of each tab.
  void example_scenario() {
    QFETCH(QString, file);
    auto w = window();
    QVERIFY(w->open_file(file.toStdString()));
    w->evaluate_now();
    const auto& o = w->shown();
    QVERIFY2(o.scenario.has_value(), "the example reads clean");
    const std::size_t n = o.plans.size();
    QVERIFY(n > 0);
    const auto* table = w->findChild<QTableWidget*>("table");
    QCOMPARE(table->columnCount(), static_cast<int>(2 * n - 1));
    // The cost chart's legend names only the parts some plan pays (rented plans pay no energy
    // apart: an "energy" swatch for nothing read as a cost, and clipped "flash wear").
    {
      const auto* cost = w->findChild<QChartView*>("cost_chart");
      QVERIFY(cost);
      for (QLegendMarker* m : cost->chart()->legend()->markers()) {
        auto* bm = qobject_cast<QBarLegendMarker*>(m);
        QVERIFY(bm);
        bool paid = false;
        for (int i = 0; i < bm->barset()->count(); ++i) paid = paid || bm->barset()->at(i) > 0;
        QVERIFY2(m->isVisible() == paid, qPrintable(bm->label()));
      }
    }
    for (const char* row :
         {"fits?", "GPUs", "peak GPU memory (device, judged for fit)", "job time", "cost", "GPU time not computing"})
      QVERIFY2(row_of(table, row) >= 0, row);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& e = o.evaluations[i];
      const int c = MainWindow::column_of(static_cast<int>(i));
      QCOMPARE(cell(table, "fits?", c), QString(e.feasible() ? "yes" : "NO"));
      QCOMPARE(cell(table, "peak GPU memory (device, judged for fit)", c),
               QString::fromStdString(ftplan::format_bytes(e.memory.gpu_peak_bytes())));
      // No time or dollars for a plan that does not fit; cents below $100.
      QCOMPARE(cell(table, "cost", c),
               e.feasible() ? QString::fromStdString(ftplan::present::money(e.cost.cost_usd)) : QString("-"));
      QCOMPARE(cell(table, "job time", c),
               e.feasible() ? QString::fromStdString(ftplan::format_duration(e.cost.job_time_s)) : QString("-"));
      // The MFU row, computed here from the evaluation, and every column shown.
      if (e.feasible()) QCOMPARE(cell(table, "MFU", c), QString("%1%").arg(100 * e.step.mfu, 0, 'f', 1));
      QVERIFY(!table->isColumnHidden(c));
      if (i > 0) {
        QVERIFY(!table->isColumnHidden(c + 1));
        QVERIFY2(!cell(table, "job time", c + 1).isEmpty() || !e.feasible(), "an empty 'vs first' cell");
      }
      // Job time: plan i's bar, in hours, on a log axis, its time written by it.
      const auto* time = w->findChild<QChartView*>("time_chart");
      if (e.feasible()) {
        QVERIFY(qAbs(bar_value(time, "job time", i, n) / (e.cost.job_time_s / 3600) - 1) < 1e-9);
        QVERIFY(bar_label(time, i, n).contains(QString::fromStdString(ftplan::format_duration(e.cost.job_time_s))));
      }
      bool log_axis = false;
      for (QAbstractAxis* axis : time->chart()->axes()) log_axis = log_axis || qobject_cast<QLogValueAxis*>(axis);
      QVERIFY2(log_axis, "the job-time axis is linear: a 51-minute plan beside days has no visible bar");
      // Cost: each part of the stacked bar is that part's dollars (none for a plan without a price).
      const auto* cost = w->findChild<QChartView*>("cost_chart");
      const bool priced = e.feasible() && e.cost.priced();
      QCOMPARE(bar_value(cost, "hardware", i, n), priced ? e.cost.hardware_usd : 0.0);
      QCOMPARE(bar_value(cost, "energy", i, n), priced ? e.cost.energy_usd : 0.0);
      QCOMPARE(bar_value(cost, "flash wear", i, n), priced ? e.cost.wear_usd : 0.0);
      // The memory bar is the figure judged for fit (allocator slack included), the line the usable capacity.
      const auto* memory = w->findChild<QChartView*>("memory_chart");
      QVERIFY(qAbs(bar_total(memory, i, n) - e.memory.gpu_peak_bytes() / kGiB) <
              1e-6 * (1 + e.memory.gpu_peak_bytes() / kGiB));
      // (In GiB, as drawn: a tolerance of 1e-9 x the bytes, ~85, was larger than the ~80 it checked.)
      QVERIFY(qAbs(capacity_line(memory, i) - e.memory.gpu_capacity_bytes() / kGiB) <
              1e-9 * (1 + e.memory.gpu_capacity_bytes() / kGiB));
      const auto* host = w->findChild<QChartView*>("host_chart");
      QVERIFY(qAbs(bar_total(host, i, n) - e.memory.peak(ftplan::plan::Tier::cpu) / kGiB) <
              1e-6 * (1 + e.memory.peak(ftplan::plan::Tier::cpu) / kGiB));
      // Each bar's label gives its share of the capacity: a nearly full host reads as such on an
      // axis a larger host sets.
      if (e.memory.capacity(ftplan::plan::Tier::cpu) > 0) {
        const QString share = QString(" (%1%)").arg(
            100.0 * e.memory.peak(ftplan::plan::Tier::cpu) / e.memory.capacity(ftplan::plan::Tier::cpu), 0, 'f', 0);
        bool labelled = false;
        for (QAbstractAxis* axis : host->chart()->axes())
          if (auto* bars = qobject_cast<QBarCategoryAxis*>(axis))
            labelled = bars->categories().size() == static_cast<int>(n) &&  // bottom-up: the last plan first
                       bars->categories()[static_cast<int>(n - 1 - i)].contains(share);
        QVERIFY2(labelled, qPrintable("no capacity share" + share + " by plan " + QString::number(i) + "'s host bar"));
      }
      const auto* nvme = w->findChild<QChartView*>("nvme_chart");
      QVERIFY(qAbs(bar_total(nvme, i, n) - e.memory.peak(ftplan::plan::Tier::nvme) / 1e12) <
              1e-6 * (1 + e.memory.peak(ftplan::plan::Tier::nvme) / 1e12));
      // CXL memory: a chart where some plan's node has expanders, each bar the tier's peak.
      const auto* cxl = w->findChild<QChartView*>("cxl_chart");
      const bool any_cxl = std::any_of(o.evaluations.begin(), o.evaluations.end(), [](const auto& x) {
        return x.memory.capacity(ftplan::plan::Tier::cxl) > 0 || x.memory.peak(ftplan::plan::Tier::cxl) > 0;
      });
      QCOMPARE(!cxl->isHidden(), any_cxl);
      if (any_cxl)
        QVERIFY(qAbs(bar_total(cxl, i, n) - e.memory.peak(ftplan::plan::Tier::cxl) / kGiB) <
                1e-6 * (1 + e.memory.peak(ftplan::plan::Tier::cxl) / kGiB));
      // Each memory category has one colour in every chart of every scenario (by position, a colour
      // moved when a category was empty: blue was weights in one chart and activations beside it).
      for (const auto* view : {memory, host, nvme})
        for (QAbstractSeries* series : view->chart()->series())
          if (auto* bars = qobject_cast<QHorizontalStackedBarSeries*>(series))
            for (QBarSet* set : bars->barSets()) {
              const auto [at, fresh] = category_colors_.emplace(set->label(), set->color());
              QVERIFY2(at->second == set->color(), qPrintable(set->label() + " changes colour"));
              // A category in the legend is one some plan has (a swatch for nothing reads as a part).
              bool some = false;
              for (int k = 0; k < set->count(); ++k) some = some || set->at(k) > 0;
              QVERIFY2(some, qPrintable(set->label() + " is listed with no bytes in any plan"));
            }
    }
    // The step timeline (simulated when its tab is shown): the first plan's whole step, traced,
    // within the steady-state shortcut's 0.5% of the evaluation's; its streams and links.
    auto* timeline = w->findChild<ftplan::gui::TimelineView*>("timeline");
    w->findChild<QTabWidget*>("tabs")->setCurrentIndex(3);
    w->wait_for_timeline();  // simulated on a worker thread
    if (o.evaluations[0].feasible()) {
      qInfo("traced step %.6f s, evaluated %.6f s (timeline %.6f s)", timeline->timeline().step_s,
            o.evaluations[0].step.step_time_s, o.evaluations[0].step.timeline.whole_step_s());
      QVERIFY(qAbs(timeline->timeline().step_s / o.evaluations[0].step.step_time_s - 1) < 0.005);
      QVERIFY(!timeline->timeline().intervals.empty());
      QVERIFY(!timeline->tracks().streams.empty());
      // Each row says how busy it is over the step; the compute stream's share is the traced
      // step's own compute utilization (what simulate prints as "busy").
      const QStringList rows = timeline->row_names();
      for (const QString& r : rows) QVERIFY2(r.endsWith('%'), qPrintable(r));
      double busy = 0;
      for (const auto& t : timeline->tracks().streams)
        if (t.name == "compute")
          for (const auto& sp : t.spans) busy += sp.end_s - sp.start_s;
      const QString compute = rows.front();
      QVERIFY2(compute.startsWith("compute "), qPrintable(compute));
      QCOMPARE(compute.mid(8).chopped(1).toInt(), qRound(100 * busy / timeline->timeline().step_s));
    }
    w->findChild<QTabWidget*>("tabs")->setCurrentIndex(0);
    QCOMPARE(w->findChild<QLabel*>("answer")->text(), QString::fromStdString(o.answer));
    // Under the table: the verdict, what each plan's capex buys, and every advice note.
    const QString verdict = w->findChild<QLabel*>("verdict")->text();
    QVERIFY(verdict.startsWith(QString::fromStdString(o.verdict)));
    if (!o.bought.empty()) QVERIFY2(verdict.contains(QString::fromStdString(o.bought)), "no bill of materials");
    for (const auto& note : o.advice) QVERIFY2(verdict.contains(QString::fromStdString("Note: " + note)), note.c_str());
    // A search's scatter draws the deadline and budget it was held to, where they are.
    if (o.search) {
      const auto& k = o.scenario->constraints;
      const auto* search = w->findChild<QChartView*>("search_chart");
      int limits = 0;
      for (QAbstractSeries* s : search->chart()->series())
        if (auto* line = qobject_cast<QLineSeries*>(s)) {
          if (line->name().startsWith("deadline ")) {
            QVERIFY(qAbs(line->at(0).x() - k.deadline_s / 3600) < 1e-9);
            ++limits;
          } else if (line->name().startsWith("budget ")) {
            QVERIFY(qAbs(line->at(0).y() - k.budget_usd) < 1e-9);
            ++limits;
          }
        }
      QCOMPARE(limits, (k.deadline_s > 0) + (k.budget_usd > 0));
      // The picks (the table's columns) marked among the points.
      const auto& r = *o.search;
      std::set<int> picks;
      for (int i : {r.fastest, r.cheapest, r.lowest_power, r.fewest_gpus})
        if (i >= 0 && r.candidates[static_cast<std::size_t>(i)].evaluation.cost.priced()) picks.insert(i);
      int marked = -1;
      for (QAbstractSeries* s : search->chart()->series())
        if (s->name() == "picks (table columns)") marked = static_cast<QScatterSeries*>(s)->count();
      QCOMPARE(marked, static_cast<int>(picks.size()));
    }
    QVERIFY(!o.answer.empty());
    auto* tabs = w->findChild<QTabWidget*>("tabs");
    QCOMPARE(tabs->isTabVisible(2), o.search != nullptr);
    const std::string stem = fs::path(file.toStdString()).stem().string();
    for (int t = 0; t < tabs->count(); ++t) {
      if (!tabs->isTabVisible(t)) continue;
      tabs->setCurrentIndex(t);
      QApplication::processEvents();
      const QString shot =
          QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / (stem + "-" + std::to_string(t) + ".png"));
      QVERIFY(w->grab().save(shot));
    }
  }

  // A pipeline whose host peaks at another stage than its GPU: the host bar is the node's worst
  // stage's total, the GPU-peak stage's categories plus an "other stages" segment (red without it:
  // mutant host_other_stages_missing).
  // A plan of pipeline stages: the timeline shows the slowest stage's rank, or the one chosen.
  void the_timeline_shows_a_chosen_stage() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_TEST_DATA) / "scenarios" / "fsdp-pipeline.yaml"));
    w->evaluate_now();
    auto* timeline = w->findChild<ftplan::gui::TimelineView*>("timeline");
    auto* stage = w->findChild<QComboBox*>("timeline_stage");
    QSignalSpy shown(w.get(), &MainWindow::timeline_shown);
    w->findChild<QTabWidget*>("tabs")->setCurrentIndex(w->findChild<QTabWidget*>("tabs")->count() - 1);
    QVERIFY(shown.count() > 0 || shown.wait(60000));
    QCOMPARE(stage->count(), 3);  // the slowest, stage 0, stage 1
    const int slowest = w->shown().evaluations[0].step.stage;
    QCOMPARE(timeline->tracks().stage, slowest);
    const int other = 1 - slowest;
    shown.clear();
    stage->setCurrentIndex(other + 1);
    QVERIFY(shown.count() > 0 || shown.wait(60000));
    QCOMPARE(timeline->tracks().stage, other);
    QVERIFY2(timeline->title().contains(QString("stage %1's rank; the slowest is stage %2").arg(other).arg(slowest)),
             qPrintable(timeline->title()));
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "step-timeline-stage.png")));
  }

  void the_host_bar_includes_other_stages() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_TEST_DATA) / "scenarios" / "pipeline-activations-host.yaml"));
    w->evaluate_now();
    const auto& o = w->shown();
    QCOMPARE(o.plans.size(), std::size_t{1});
    const auto& m = o.evaluations[0].memory;
    QVERIFY2(m.peak(ftplan::plan::Tier::cpu) > 1.5 * m.bytes(ftplan::plan::Tier::cpu).total(),
             "the host-peak stage is no longer another stage");
    const auto* host = w->findChild<QChartView*>("host_chart");
    QVERIFY(qAbs(bar_total(host, 0, 1) - m.peak(ftplan::plan::Tier::cpu) / kGiB) <
            1e-6 * (1 + m.peak(ftplan::plan::Tier::cpu) / kGiB));
    QVERIFY(qAbs(bar_value(host, "other stages", 0, 1) -
                 (m.peak(ftplan::plan::Tier::cpu) - m.bytes(ftplan::plan::Tier::cpu).total()) / kGiB) < 1e-6);
  }

  // An 8B LoRA plan on an RTX 4090 that needs more than the card's usable memory (24.75 of 23.99
  // GiB): its bar runs past its capacity line, and the table shows no time or cost for it.
  void a_plan_that_does_not_fit_is_drawn_past_its_capacity() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_TEST_DATA) / "scenarios" / "llama8b-4090-nofit.yaml"));
    w->evaluate_now();
    const auto& o = w->shown();
    std::size_t at = o.plans.size();
    for (std::size_t i = 0; i < o.plans.size(); ++i)
      if (o.plans[i].name == "1x RTX 4090 LoRA") at = i;
    QVERIFY(at < o.plans.size());
    const auto& e = o.evaluations[at];
    QVERIFY(!e.memory.fits);
    const auto* memory = w->findChild<QChartView*>("memory_chart");
    QVERIFY(bar_total(memory, at, o.plans.size()) > capacity_line(memory, at));
    // Marked so at any scale: a cross by its figure and its capacity line red.
    QVERIFY(bar_label(memory, at, o.plans.size()).endsWith(QString::fromUtf8(" \u2717")));
    QVERIFY(mark(memory, at));
    QCOMPARE(mark(memory, at)->pen().color(), QColor(200, 0, 0));
    for (std::size_t i = 0; i < o.plans.size(); ++i)
      if (o.evaluations[i].memory.fits)
        QVERIFY(!bar_label(memory, i, o.plans.size()).contains(QString::fromUtf8("\u2717")));
    // Its column shaded, and the two rows under the table say why and what would fit.
    const int col = MainWindow::column_of(static_cast<int>(at));
    const auto* tbl = w->findChild<QTableWidget*>("table");
    QCOMPARE(tbl->item(row_of(tbl, "fits?"), col)->background().color(), QColor(255, 235, 235));
    QVERIFY(!tbl->isRowHidden(row_of(tbl, "why not")));
    QCOMPARE(cell(tbl, "why not", col), QString::fromStdString(e.reason()));
    QVERIFY(!tbl->isRowHidden(row_of(tbl, "what would fit")));
    QVERIFY(!o.fixes[at].empty());
    QVERIFY(cell(tbl, "what would fit", col).startsWith(QString::fromStdString(o.fixes[at].front().change)));
    // No dollars for a plan that does not run.
    QCOMPARE(bar_total(w->findChild<QChartView*>("cost_chart"), at, o.plans.size()), 0.0);
    // ... which the categories alone (without the allocator slack) would hide.
    double categories = 0;
    for (double b : e.memory.gpu().bytes) categories += b;
    QVERIFY(categories < e.memory.gpu_capacity_bytes());
    const auto* table = w->findChild<QTableWidget*>("table");
    QCOMPARE(cell(table, "job time", MainWindow::column_of(static_cast<int>(at))), QString("-"));
  }

  // A knob change is evaluated on the worker thread and changes what is shown.
  void a_knob_edit_goes_through_the_worker() {
    auto w = window();
    QSignalSpy done(w.get(), &MainWindow::evaluated);
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama70b-full-h100-vs-workstation.yaml"));
    QVERIFY(done.wait(120000));
    QVERIFY(w->shown().scenario.has_value());
    const double before = w->shown().evaluations[0].memory.gpu_peak_bytes();
    w->findChild<QComboBox*>("checkpointing")->setCurrentText("none");
    QVERIFY(done.wait(120000));
    QCOMPARE(w->shown().plans[0].job.checkpointing, ftplan::plan::Checkpointing::none);
    QVERIFY(w->shown().evaluations[0].memory.gpu_peak_bytes() > before);
    QCOMPARE(cell(w->findChild<QTableWidget*>("table"), "activation checkpointing", 0), QString("none"));
  }

  // Every error listed, whole; every line named marked; a click goes to its line.
  void every_error_is_listed_and_marked() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_TEST_DATA) / "scenarios" / "bad.yaml"));
    w->evaluate_now();
    auto* errors = w->findChild<QListWidget*>("errors");
    QCOMPARE(errors->count(), 5);  // tests/cli/expected/check_bad.txt
    QApplication::processEvents();
    for (int r = 0; r < errors->count(); ++r)
      QVERIFY2(errors->visualItemRect(errors->item(r)).bottom() <= errors->viewport()->height(), "an error is cut off");
    auto* editor = w->findChild<QPlainTextEdit*>("editor");
    QSet<int> marked;
    for (const auto& mark : editor->extraSelections()) marked.insert(mark.cursor.blockNumber() + 1);
    QCOMPARE(marked, (QSet<int>{6, 11, 13, 14}));
    QTest::mouseClick(errors->viewport(), Qt::LeftButton, {}, errors->visualItemRect(errors->item(3)).center());
    QCOMPARE(editor->textCursor().blockNumber() + 1, 13);
  }

  // An edit that breaks a scenario leaves the last results on screen, and says they are not
  // current: the answer on top, the table greyed; fixing the text brings them back as they were.
  void results_of_an_earlier_text_are_marked_not_current() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama8b-single-gpu.yaml"));
    w->evaluate_now();
    auto* answer = w->findChild<QLabel*>("answer");
    auto* table = w->findChild<QTableWidget*>("table");
    const QString current = answer->text();
    QVERIFY(current.startsWith("Cheapest"));
    QVERIFY(table->isEnabled());
    auto* editor = w->findChild<QPlainTextEdit*>("editor");
    const QString good = editor->toPlainText();
    editor->setPlainText(good + "\nnot_a_key: 1\n");
    w->evaluate_now();
    QVERIFY2(answer->text().startsWith("Not current: the text has 1 problem(s)"), qPrintable(answer->text()));
    QVERIFY(answer->text().contains(current));
    QVERIFY(!table->isEnabled());
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "not-current.png")));
    editor->setPlainText(good);
    w->evaluate_now();
    QCOMPARE(answer->text(), current);
    QVERIFY(table->isEnabled());
  }

  // Pinned: a knob change shows each changed figure against the baseline, in the table and as marks.
  void a_pinned_baseline_shows_the_changes() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama70b-full-h100-vs-workstation.yaml"));
    w->evaluate_now();
    const double before = w->shown().evaluations[0].memory.gpu_peak_bytes();
    w->pin();
    w->findChild<QComboBox*>("checkpointing")->setCurrentText("none");
    w->evaluate_now();
    const double after = w->shown().evaluations[0].memory.gpu_peak_bytes();
    QVERIFY(after > before);
    const auto* table = w->findChild<QTableWidget*>("table");
    const QString peak = cell(table, "peak GPU memory (device, judged for fit)", 0);
    QVERIFY2(peak.contains(QString::fromUtf8("\u0394+%1%").arg(100 * (after / before - 1), 0, 'f', 0)),
             qPrintable(peak));
    QVERIFY(cell(table, "activation checkpointing", 0).contains("(was full (auto))"));
    const auto* memory = w->findChild<QChartView*>("memory_chart");
    QVERIFY(qAbs(capacity_line(memory, 0, "pinned") - before / kGiB) < 1e-9 * (1 + before / kGiB));
    w->unpin();
    QCOMPARE(capacity_line(memory, 0, "pinned"), -1.0);
    QVERIFY(!cell(table, "peak GPU memory (device, judged for fit)", 0).contains(QString::fromUtf8("\u0394")));
  }

  // The new-scenario form's choices become a commented scenario in the editor, unsaved, evaluated
  // as any text: here 8 H100s against one with aiDAPTIV+ offload beside it.
  void a_new_scenario_from_the_form() {
    auto w = window();
    ftplan::gui::NewScenario n;
    n.model = "llama-3.1-8b";
    n.method = "full";
    n.tokens = "10M";
    n.offload = "aidaptiv";
    n.compare_tiered = true;
    w->new_scenario(n);
    QVERIFY(w->isWindowModified());
    QVERIFY(w->windowTitle().startsWith("new scenario"));
    QVERIFY(w->findChild<QPlainTextEdit*>("editor")->toPlainText().startsWith("# Written by ftplan-gui"));
    w->evaluate_now();
    QCOMPARE(w->shown().plans.size(), std::size_t{2});
    QCOMPARE(QString::fromStdString(w->shown().plans[1].name), QString("B tiered: aidaptiv"));
    QVERIFY(w->shown().errors.empty());
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "new-scenario.png")));
  }

  // File > Import: training configs become a scenario in the editor through the CLI's importer,
  // the GPU the dialog asks for applied; a file that is no config is a message, the text kept.
  void importing_training_configs() {
    auto w = window();
    const fs::path data(FTPLAN_TEST_DATA);
    QVERIFY(w->import_configs({data / "import" / "torchtune" / "8B_qlora_single_device.yaml"}, "rtx-4090", 1));
    auto* editor = w->findChild<QPlainTextEdit*>("editor");
    const QString text = editor->toPlainText();
    QVERIFY(text.contains("rtx-4090"));
    QVERIFY(w->isWindowModified());
    w->evaluate_now();
    QVERIFY(w->shown().errors.empty());
    QCOMPARE(w->shown().plans.size(), std::size_t{1});
    QCOMPARE(QString::fromStdString(w->shown().plans[0].cluster.gpu.name), QString("rtx-4090"));
    QVERIFY(!w->import_configs({data / "hf" / "gpt2" / "config.json"}, "h100-sxm-80gb", 8));
    QCOMPARE(editor->toPlainText(), text);
    // Dropped on the window: a scenario file opens, configs import (the configs say no GPU: a
    // message, the text kept).
    QVERIFY(w->open_dropped({fs::path(FTPLAN_SCENARIOS_DIR) / "llama8b-single-gpu.yaml"}));
    QVERIFY(w->windowTitle().startsWith("llama8b-single-gpu.yaml"));
    QVERIFY(!w->open_dropped({data / "import" / "torchtune" / "8B_qlora_single_device.yaml"}));
    QVERIFY(w->windowTitle().startsWith("llama8b-single-gpu.yaml"));
  }

  // Save writes the text back to its file; the table and charts export as compare writes them.
  void save_and_export() {
    const fs::path dir = fs::path(FTPLAN_SCREENSHOT_DIR).parent_path() / "gui_test_files";
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama8b-single-gpu.yaml", dir / "s.yaml");
    auto w = window();
    QVERIFY(w->open_file(dir / "s.yaml"));
    auto* editor = w->findChild<QPlainTextEdit*>("editor");
    // The title marks unsaved edits, and the file opened is first among the recent ones.
    QVERIFY(!w->isWindowModified());
    QVERIFY(w->windowTitle().contains("[*]"));
    QCOMPARE(MainWindow::recent_files().value(0),
             QString::fromStdString(fs::absolute(dir / "s.yaml").lexically_normal().string()));
    editor->appendPlainText("# edited");
    QVERIFY(w->isWindowModified());
    QVERIFY(w->save());
    QVERIFY(!w->isWindowModified());
    std::ifstream in(dir / "s.yaml");
    std::stringstream text;
    text << in.rdbuf();
    QCOMPARE(QString::fromStdString(text.str()), editor->toPlainText());
    w->evaluate_now();
    QVERIFY(w->export_table(dir / "t.csv"));
    QVERIFY(w->export_table(dir / "t.json"));
    QVERIFY(fs::file_size(dir / "t.csv") > 100);
    std::ifstream csv(dir / "t.csv");
    std::string header;
    std::getline(csv, header);
    QVERIFY2(header.rfind("plan,", 0) == 0 && header.find("cost_usd") != std::string::npos, header.c_str());
    std::ifstream json(dir / "t.json");
    std::stringstream j;
    j << json.rdbuf();
    QVERIFY(j.str().find("\"schema_version\"") != std::string::npos);
    // The advice notes go with the table, as compare --format json writes them.
    const auto& advice = w->shown().advice;
    QVERIFY(!advice.empty());
    QVERIFY2(j.str().find("\"advice\": \"" + advice.front().substr(0, 40)) != std::string::npos,
             j.str().substr(0, 400).c_str());
    // The step trace is simulated off the UI thread and written whole: what simulate --trace writes.
    QSignalSpy traced(w.get(), &MainWindow::trace_exported);
    QVERIFY(w->export_trace(1, QString::fromStdString((dir / "trace.json").string())));
    QVERIFY(!w->export_trace(7, QString::fromStdString((dir / "none.json").string())));  // no such plan
    QVERIFY(traced.count() > 0 || traced.wait(60000));
    {
      std::ifstream trace(dir / "trace.json");
      std::stringstream t;
      t << trace.rdbuf();
      ftplan::sim::Options o;
      o.trace = true;
      QVERIFY(t.str() == ftplan::sim::simulate_step(w->shown().scenario->model, w->shown().plans[1], o).trace_json);
      QVERIFY(t.str().find("traceEvents") != std::string::npos);
      // Closed while an export runs: the window finishes it and writes the file as asked.
      {
        auto closing = window();
        QVERIFY(closing->open_file(dir / "s.yaml"));
        closing->evaluate_now();
        QVERIFY(closing->export_trace(1, QString::fromStdString((dir / "trace-at-close.json").string())));
      }
      std::ifstream at_close(dir / "trace-at-close.json");
      std::stringstream c;
      c << at_close.rdbuf();
      QVERIFY(c.str() == t.str());
    }
    const auto png = w->export_charts(dir / "c.png");
    QCOMPARE(png.size(), std::size_t{5});
    for (const auto& f : png) QVERIFY(fs::file_size(f) > 1000);
    QVERIFY(fs::exists(dir / "c-gpu-memory.png"));
#if FTPLAN_GUI_SVG
    const auto svg = w->export_charts(dir / "c.svg");
    QCOMPARE(svg.size(), std::size_t{5});
    std::ifstream first(svg.front());
    std::string head(5, ' ');
    first.read(head.data(), 5);
    QCOMPARE(QString::fromStdString(head), QString("<?xml"));
#endif
  }

  // The plan form's CXL expanders: shown from the text, written back into it; none takes them away.
  void expanders_are_edited_in_the_plan_form() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "workstation-cxl-vs-dram.yaml"));
    w->evaluate_now();
    auto* pick = w->findChild<QComboBox*>("expander");
    auto* count = w->findChild<QSpinBox*>("expander_count");
    auto* editor = w->findChild<QPlainTextEdit*>("editor");
    w->findChild<QComboBox*>("plan_pick")->setCurrentIndex(2);  // C: two CZ120s
    QCOMPARE(pick->currentText(), QString("micron-cz120-256gb"));
    QCOMPARE(count->value(), 2);
    count->setValue(4);
    QVERIFY(editor->toPlainText().contains("expanders: [{expander: micron-cz120-256gb, count: 4}]"));
    w->evaluate_now();
    QCOMPARE(w->shown().plans[2].cluster.expanders.at(0).second, 4);
    w->findChild<QComboBox*>("plan_pick")->setCurrentIndex(1);  // B: none; picking one writes a count of 1
    QCOMPARE(pick->currentIndex(), 0);
    pick->setCurrentText("samsung-cmm-d-128gb");
    emit pick->activated(pick->currentIndex());
    QCOMPARE(count->value(), 1);
    QVERIFY(editor->toPlainText().contains("expander: samsung-cmm-d-128gb, count: 1"));
    w->evaluate_now();
    QCOMPARE(w->shown().plans[1].cluster.expanders.size(), std::size_t{1});
    pick->setCurrentIndex(0);
    emit pick->activated(0);
    w->evaluate_now();
    QVERIFY(w->shown().plans[1].cluster.expanders.empty());
  }

  // The knobs' values go into the text; the knobs go back to "as written"; the result is the same.
  void knobs_are_written_into_the_text() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama70b-full-h100-vs-workstation.yaml"));
    auto* ckpt = w->findChild<QComboBox*>("checkpointing");
    ckpt->setCurrentText("none");
    w->evaluate_now();
    const double knobbed = w->shown().evaluations[0].memory.gpu_peak_bytes();
    QVERIFY(w->write_knobs());
    QCOMPARE(ckpt->currentText(), QString("as written"));
    QVERIFY(w->findChild<QPlainTextEdit*>("editor")->toPlainText().contains("\n  activation_checkpointing: none\n"));
    w->evaluate_now();
    QCOMPARE(w->shown().evaluations[0].memory.gpu_peak_bytes(), knobbed);
  }

  // The timeline follows the chosen plan and zooms around a point.
  // On a 1280 x 720 screen the charts' value axes keep their labels legible: as many ticks as fit
  // (six labels in ~90 px were elided to "..."); back at full size, more again.
  void charts_fit_a_small_window() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama70b-full-h100-vs-workstation.yaml"));
    w->evaluate_now();
    const auto ticks_fit = [&](const char* name) {
      auto* view = w->findChild<QChartView*>(name);
      QChart* chart = view->chart();
      for (QAbstractAxis* a : chart->axes(Qt::Horizontal))
        if (auto* v = qobject_cast<QValueAxis*>(a)) {
          qInfo("%s: %d ticks over %.0f px", name, v->tickCount(), chart->plotArea().width());
          return (v->tickCount() - 1) * 25.0 <= chart->plotArea().width();  // labels like "100" and a gap
        }
      for (QAbstractAxis* a : chart->axes(Qt::Horizontal))
        if (auto* log = qobject_cast<QLogValueAxis*>(a)) {  // job time: a label at each power of its base
          const int labels =
              static_cast<int>(std::floor(std::log10(log->max() / log->min()) / std::log10(log->base()) + 1e-9)) + 1;
          qInfo("%s: %d labels (base %.0f) over %.0f px", name, labels, log->base(), chart->plotArea().width());
          return (labels - 1) * 25.0 <= chart->plotArea().width();
        }
      return true;
    };
    for (const QSize size : {QSize(1280, 720), QSize(1600, 1000)}) {
      w->resize(size);
      w->show();
      QApplication::processEvents();
      for (const char* chart : {"time_chart", "cost_chart", "memory_chart"}) QVERIFY2(ticks_fit(chart), chart);
      // The charts whole (their axes and legends), the table scrolling instead: at 1280 x 720 the
      // table took its rows' height and the charts' lower part lay outside the window.
      for (const char* chart : {"time_chart", "cost_chart", "memory_chart"}) {
        auto* view = w->findChild<QChartView*>(chart);
        const int bottom = view->mapTo(w.get(), QPoint(0, view->height())).y();
        const int inside = w->centralWidget()->geometry().bottom() + 1;
        qInfo("%s: bottom at %d of %d px at %d x %d", chart, bottom, inside, size.width(), size.height());
        QVERIFY2(bottom <= inside, chart);
      }
    }
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "window-1600.png")));
  }

  void the_step_timeline_zooms() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama70b-full-h100-vs-workstation.yaml"));
    w->evaluate_now();
    auto* timeline = w->findChild<ftplan::gui::TimelineView*>("timeline");
    QSignalSpy shown(w.get(), &MainWindow::timeline_shown);
    w->findChild<QComboBox*>("timeline_plan")->setCurrentIndex(1);
    QVERIFY(shown.wait(60000));  // the traced step comes from a worker thread
    // The workstation plan's step simulated whole with a trace: within the steady-state shortcut's
    // 0.5% of the evaluation's step; a row per stream and per link; memory per tier under them,
    // peaking where the evaluation's simulation did (the host tier holds the offloaded state).
    const auto& e = w->shown().evaluations[1];
    QVERIFY(qAbs(timeline->timeline().step_s / e.step.step_time_s - 1) < 0.005);
    const auto& tracks = timeline->tracks();
    QVERIFY(!tracks.streams.empty());
    QVERIFY(!tracks.links.empty());
    QCOMPARE(timeline->row_names().size(), static_cast<int>(tracks.streams.size() + tracks.links.size()));
    const auto peak = [](const std::vector<ftplan::sim::MemorySample>& series) {
      double p = 0;
      for (const auto& x : series) p = std::max(p, x.bytes);
      return p;
    };
    qInfo("GPU peak %.3f GiB (evaluation %.3f), host peak %.3f GiB (evaluation %.3f)", peak(tracks.memory[0]) / kGiB,
          e.step.gpu_peak_bytes() / kGiB, peak(tracks.memory[1]) / kGiB, e.step.peak(ftplan::plan::Tier::cpu) / kGiB);
    QVERIFY(e.step.peak(ftplan::plan::Tier::cpu) > 0);
    QVERIFY(qAbs(peak(tracks.memory[0]) / e.step.gpu_peak_bytes() - 1) < 0.01);
    QVERIFY(qAbs(peak(tracks.memory[1]) / e.step.peak(ftplan::plan::Tier::cpu) - 1) < 0.01);
    w->findChild<QTabWidget*>("tabs")->setCurrentIndex(3);
    QApplication::processEvents();
    const double whole = timeline->visible_s();
    QVERIFY(qAbs(whole - timeline->timeline().step_s) < 1e-9 * whole);
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "step-timeline-tiered.png")));
    // What that paint drew: a legend entry for every category of the streams' and the links' bars
    // (the wide window has room for all); each tier that holds something its curve, and its
    // capacity line where the curve's scale reaches it (the host, 114 of 115 GiB, does).
    std::set<QString> categories;
    for (const auto* group : {&tracks.streams, &tracks.links})
      for (const auto& t : *group)
        for (const auto& sp : t.spans) categories.insert(QString::fromStdString(sp.category));
    const auto& drawn = timeline->drawn();
    QStringList want;
    for (const auto& c : categories) want << c;
    QVERIFY2(std::set<QString>(drawn.legend.begin(), drawn.legend.end()) == categories,
             qPrintable("legend: " + drawn.legend.join(", ") + "; categories: " + want.join(", ")));
    int curves = 0, lines = 0;
    for (std::size_t t = 0; t < ftplan::plan::kTierCount; ++t) {
      const double top = peak(tracks.memory[t]) * 1.15, capacity = tracks.capacity_bytes[t];
      curves += peak(tracks.memory[t]) > 0;
      lines += peak(tracks.memory[t]) > 0 && capacity > 0 && capacity <= top;
    }
    QCOMPARE(drawn.memory_curves, curves);
    QCOMPARE(drawn.capacity_lines, lines);
    // The whole step is on screen: every span on the critical path is outlined, and there are some
    // (the step's end waited for something on this rank).
    int critical = 0;
    for (const auto* group : {&tracks.streams, &tracks.links})
      for (const auto& t : *group)
        for (const auto& sp : t.spans) critical += sp.critical;
    QVERIFY(critical > 0);
    QCOMPARE(drawn.critical_bars, critical);
    // At 1280 x 720 the eleven categories take a second row rather than go unnamed.
    w->resize(1280, 720);
    QApplication::processEvents();
    timeline->repaint();
    QCOMPARE(std::set<QString>(timeline->drawn().legend.begin(), timeline->drawn().legend.end()), categories);
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "step-timeline-1280x720.png")));
    w->resize(1600, 1000);
    QApplication::processEvents();
    // Qt's delayed tooltip event over an op shows the op's figures, not the widget's fixed help
    // (which replaced them a second after they appeared).
    QPoint over;
    for (int y = 0; y < timeline->height() && over.isNull(); y += 4)
      for (int x = 0; x < timeline->width() && over.isNull(); x += 4)
        if (timeline->tip_at(QPointF(x, y)).contains(" to ")) over = QPoint(x, y);
    QVERIFY2(!over.isNull(), "no op under any point of the timeline");
    QHelpEvent tip(QEvent::ToolTip, over, timeline->mapToGlobal(over));
    QApplication::sendEvent(timeline, &tip);
    QCOMPARE(QToolTip::text(), timeline->tip_at(over));
    QVERIFY(QToolTip::text() != timeline->toolTip());
    timeline->zoom(4, whole / 2);
    QVERIFY(qAbs(timeline->visible_s() - whole / 4) < 1e-9 * whole);
    QApplication::processEvents();
    QVERIFY(
        w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "step-timeline-tiered-zoomed.png")));
    // Far enough in, the bars name their ops.
    timeline->zoom(300, whole / 2);
    QApplication::processEvents();
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "step-timeline-tiered-ops.png")));
    QVERIFY2(timeline->drawn().named_bars > 0, "zoomed in 1,200x, no bar names its op");
    // Shift-drag measures a span, as a profiler's ruler: over the whole step (right click), from a
    // quarter to three quarters of the plot's width, it reads half the step.
    QTest::mouseClick(timeline, Qt::RightButton);
    QCOMPARE(timeline->visible_s(), whole);
    QVERIFY(timeline->drawn().span.isEmpty());
    const int y = timeline->height() / 3, x0 = timeline->width() / 2, x1 = x0 + 200;
    QTest::mousePress(timeline, Qt::LeftButton, Qt::ShiftModifier, QPoint(x0, y));
    QTest::mouseMove(timeline, QPoint(x1, y));
    QTest::mouseRelease(timeline, Qt::LeftButton, Qt::ShiftModifier, QPoint(x1, y));
    QCOMPARE(timeline->visible_s(), whole);  // measuring does not pan
    timeline->repaint();
    QCOMPARE(timeline->drawn().span,
             QString::fromUtf8("\u0394 ") +
                 QString::fromStdString(ftplan::format_duration(timeline->time_at(x1) - timeline->time_at(x0))));
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "step-timeline-span.png")));
    // A GPU nearly full (the 4090 LoRA plan: 23.8 of 24.0 GiB judged for fit) has its capacity
    // line drawn in the GPU strip, within reach of the curve's scale.
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama8b-single-gpu.yaml"));
    w->evaluate_now();
    const int lora = w->findChild<QComboBox*>("timeline_plan")->findText("1x RTX 4090 LoRA");
    QVERIFY(lora >= 0);
    shown.clear();
    w->findChild<QComboBox*>("timeline_plan")->setCurrentIndex(lora);
    QVERIFY(shown.count() > 0 || shown.wait(60000));
    timeline->repaint();
    QVERIFY(timeline->drawn().capacity_lines >= 1);
  }

  // A sweep runs on the workers and shows any output over two axes: which plan is cheapest within
  // the deadline, over model size and deadline (cost.mode held at 'rent').
  void a_sweep_runs_into_a_heatmap() {
    ftplan::gui::SweepWindow w(*zoo_, *catalog_);
    w.show();
    QSignalSpy finished(&w, &ftplan::gui::SweepWindow::finished);
    QSignalSpy progress(w.findChild<QProgressBar*>(), &QProgressBar::valueChanged);
    QVERIFY(w.open(fs::path(FTPLAN_SCENARIOS_DIR) / "sweep-tiered-vs-gpus.yaml"));
    QVERIFY(finished.wait(300000));
    QCOMPARE(w.rows(), std::size_t{2 * 4 * 7 * 2});  // cost modes x models x deadlines, 2 plans each
    // The bar moved with the points (each percent of the 56), not only at the end: a 0.3 s sweep
    // went from 0 to done in one jump under a 100 ms timer.
    QVERIFY2(progress.count() >= 50, qPrintable(QString::number(progress.count())));
    // Whether the tiered plan meets the deadline, over deadline and model size, cost.mode held at
    // its first value: each cell is that point's row.
    w.show_grid("axis.constraints.deadline", "axis.model", "meets_constraints", "tiered");
    const auto& g = w.grid();
    QCOMPARE(g.x.size(), std::size_t{7});
    QCOMPARE(g.y.size(), std::size_t{4});
    QSet<QString> seen;
    const auto text = [](const ftplan::io::Value* v) {
      return v ? QString::fromStdString(ftplan::io::csv_cell(*v)) : QString();
    };
    const auto rows = w.results();
    for (std::size_t xi = 0; xi < g.x.size(); ++xi)
      for (std::size_t yi = 0; yi < g.y.size(); ++yi) {
        int found = 0;
        for (const auto& r : rows)
          if (text(r.get("plan")) == "tiered" && text(r.get("axis.cost.mode")) == "rent" &&
              text(r.get("axis.constraints.deadline")) == QString::fromStdString(g.x[xi]) &&
              text(r.get("axis.model")) == QString::fromStdString(g.y[yi])) {
            QCOMPARE(QString::fromStdString(g.text_at(xi, yi)), text(r.get("meets_constraints")));
            ++found;
          }
        QCOMPARE(found, 1);
        seen.insert(QString::fromStdString(g.text_at(xi, yi)));
      }
    QVERIFY2(seen.size() == 2, "the tiered plan misses the shortest deadline and meets the longest");
    // The axis not on the map is named with the value it is held at.
    QCOMPARE(g.held.size(), std::size_t{1});
    QCOMPARE(QString::fromStdString(g.held[0].first), QString("axis.cost.mode"));
    QCOMPARE(QString::fromStdString(g.held[0].second), QString("rent"));
    // Another value to hold it at, picked in the window: the cells are then those points' rows.
    auto* hold = w.findChild<QComboBox*>("hold:axis.cost.mode");
    QVERIFY(hold);
    QCOMPARE(hold->count(), 2);
    QCOMPARE(hold->currentText(), QString("rent"));
    hold->setCurrentText("own");
    QTRY_COMPARE(QString::fromStdString(w.grid().held[0].second), QString("own"));
    for (std::size_t xi = 0; xi < w.grid().x.size(); ++xi)
      for (std::size_t yi = 0; yi < w.grid().y.size(); ++yi)
        for (const auto& r : rows)
          if (text(r.get("plan")) == "tiered" && text(r.get("axis.cost.mode")) == "own" &&
              text(r.get("axis.constraints.deadline")) == QString::fromStdString(w.grid().x[xi]) &&
              text(r.get("axis.model")) == QString::fromStdString(w.grid().y[yi]))
            QCOMPARE(QString::fromStdString(w.grid().text_at(xi, yi)), text(r.get("meets_constraints")));
    QCOMPARE(w.findChild<QComboBox*>("hold:axis.cost.mode")->currentText(), QString("own"));
    w.hold("axis.cost.mode", "rent");
    // A field's cells read at a glance, in its unit: job_time_s as a duration ("3.5 d", not the
    // CSV's "299300.4..." or "265.35328668763015", once drawn over the cells), cost_usd in dollars,
    // a fraction in percent, a count of tokens per second with thousands separators.
    const auto cells = [&](const char* field, const std::function<bool(QString, double)>& reads) {
      w.show_grid("axis.constraints.deadline", "axis.model", field, "tiered");
      int numbers = 0;
      for (std::size_t xi = 0; xi < w.grid().x.size(); ++xi)
        for (std::size_t yi = 0; yi < w.grid().y.size(); ++yi) {
          const double v = w.grid().number_at(xi, yi);
          if (std::isnan(v)) continue;
          ++numbers;
          const QString cell = QString::fromStdString(w.grid().text_at(xi, yi));
          QVERIFY2(reads(cell, v), qPrintable(QString(field) + ": " + cell + " for " + QString::number(v, 'g', 17)));
        }
      QVERIFY2(numbers > 0, field);
    };
    // Dollars: "$" and the figure to 4 significant digits (cents under $100), no exponent.
    cells("cost_usd", [](QString cell, double v) {
      return cell.startsWith('$') && !cell.contains('e') &&
             std::abs(cell.remove('$').remove(',').toDouble() - v) <= std::max(5e-3, 5e-4 * v);
    });
    cells("mfu", [](QString cell, double v) { return cell == QString("%1%").arg(100 * v, 0, 'f', 1); });
    cells("job_time_s",
          [](QString cell, double v) { return cell == QString::fromStdString(ftplan::format_duration(v)); });
    QApplication::processEvents();  // the held axes' pickers, shown once the event loop runs
    QVERIFY(
        w.grab().save(QString::fromStdString((fs::path(FTPLAN_SCREENSHOT_DIR) / "sweep-tiered-vs-gpus.png").string())));
    // Cancel: the run ends after the points under way, with the rows so far.
    // (Cancelled at once: the whole grid runs in ~0.2 s on two cores, so a wait first would let it
    // finish; the workers take at most the points already started.)
    finished.clear();
    QVERIFY(w.open(fs::path(FTPLAN_SCENARIOS_DIR) / "sweep-llama8b-grid.yaml"));
    w.cancel();
    QVERIFY2(w.grid().x.empty() && w.drawn_grid().x.empty(), "the last sweep's heatmap under the new sweep's title");
    QElapsedTimer clock;
    clock.start();
    QVERIFY(finished.count() == 1 || finished.wait(10000));
    qInfo("sweep stopped %lld ms after cancel, %zu rows", static_cast<long long>(clock.elapsed()), w.rows());
    QVERIFY(w.rows() < std::size_t{4 * 4 * 4 * 2});
  }

  // A per-plan control writes its key into that plan's text (comments and other lines as they
  // were) and the result changes through the worker thread.
  void a_plan_control_edit_rewrites_the_text_and_the_result() {
    auto w = window();
    QSignalSpy done(w.get(), &MainWindow::evaluated);
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama8b-single-gpu.yaml"));
    QVERIFY(done.wait(120000));
    auto* editor = w->findChild<QPlainTextEdit*>("editor");
    const QString before = editor->toPlainText();
    w->findChild<QComboBox*>("plan_pick")->setCurrentIndex(3);  // "8x H100 LoRA"
    QCOMPARE(w->control_plan(), 3);
    auto* gpus = w->findChild<QSpinBox*>("gpus");
    QCOMPARE(gpus->value(), 8);
    const double time_on_8 = w->shown().evaluations[3].cost.job_time_s;
    gpus->setValue(4);
    const QString after = editor->toPlainText();
    // One line changed, every other byte as it was.
    QStringList a = before.split('\n'), b = after.split('\n');
    QCOMPARE(a.size(), b.size());
    int changed = 0;
    for (int i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        ++changed;
        QCOMPARE(a[i], QString("    cluster: {gpu: h100-sxm-80gb, gpus: 8}"));
        QCOMPARE(b[i], QString("    cluster: {gpu: h100-sxm-80gb, gpus: 4}"));
      }
    QCOMPARE(changed, 1);
    QVERIFY(done.wait(120000));
    QCOMPARE(w->shown().plans[3].cluster.gpus(), 4);
    QVERIFY(w->shown().evaluations[3].cost.job_time_s > time_on_8);
    QCOMPARE(w->findChild<QSpinBox*>("gpus")->value(), 4);  // the controls follow the text
    // A value inside a flow mapping; then a key the plan does not have, added under it.
    w->findChild<QComboBox*>("plan_pick")->setCurrentIndex(0);
    QCOMPARE(w->findChild<QSpinBox*>("zero")->value(), 2);
    w->findChild<QSpinBox*>("zero")->setValue(3);
    QVERIFY(editor->toPlainText().contains(
        "ZeRO-Offload\n    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 3}\n"));
    QVERIFY(done.wait(120000));
    QCOMPARE(w->shown().plans[0].parallel.zero, 3);
    w->findChild<QComboBox*>("plan_pick")->setCurrentIndex(1);
    auto* offload = w->findChild<QComboBox*>("offload");
    offload->setCurrentText("activation-cpu");
    emit offload->activated(offload->currentIndex());  // as a person choosing it
    QVERIFY(editor->toPlainText().contains(
        "    cluster: {gpu: rtx-4090, gpus: 1}\n    offload: {preset: activation-cpu}\n"));
    QVERIFY(done.wait(120000));
    QCOMPARE(w->shown().plans[1].offload.preset, ftplan::plan::OffloadPreset::activation_cpu);
    QVERIFY(editor->toPlainText().startsWith("# An 8B model on one GPU"));  // comments kept
    // A preset chosen keeps the offload block's settings the new placements use, and says what
    // it left out (it wrote {preset: X} alone, dropping them unsaid).
    QString tuned = editor->toPlainText();
    QVERIFY(tuned.contains("    offload: {preset: zero-offload}\n"));
    tuned.replace("    offload: {preset: zero-offload}\n",
                  "    offload: {preset: zero-infinity, prefetch_depth: 2, buffer_count: 8}\n");
    editor->setPlainText(tuned);
    QVERIFY(done.wait(120000));
    QCOMPARE(w->shown().plans[0].offload.buffer_count, 8);
    w->findChild<QComboBox*>("plan_pick")->setCurrentIndex(0);
    offload->setCurrentText("zero-offload");
    emit offload->activated(offload->currentIndex());
    QVERIFY(editor->toPlainText().contains("    offload: {preset: zero-offload, prefetch_depth: 2}\n"));
    QVERIFY2(w->statusBar()->currentMessage().contains("offload.buffer_count: counts the parameter swap buffers"),
             qPrintable(w->statusBar()->currentMessage()));
    QVERIFY(done.wait(120000));
    QCOMPARE(w->shown().plans[0].offload.prefetch_depth, 2);
  }

  // "Why it does not fit -> what would": applying the nearest change makes the plan fit.
  void applying_what_would_fit_makes_the_plan_fit() {
    auto w = window();
    QVERIFY(w->open_file(fs::path(FTPLAN_TEST_DATA) / "scenarios" / "llama8b-4090-nofit.yaml"));
    w->evaluate_now();
    QVERIFY(!w->shown().evaluations[1].memory.fits);
    QVERIFY(!w->shown().fixes[1].empty());
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "what-would-fit-before.png")));
    const std::string change = w->shown().fixes[1][0].change;
    qInfo("applying '%s'", change.c_str());
    QVERIFY(w->apply_fix(1, 0));
    const QString text = w->findChild<QPlainTextEdit*>("editor")->toPlainText();
    QVERIFY(text.startsWith("# The 8B LoRA job of scenarios/llama8b-single-gpu.yaml"));
    w->evaluate_now();
    QVERIFY(w->shown().evaluations[1].memory.fits);
    QVERIFY(w->shown().fixes[1].empty());
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "what-would-fit-applied.png")));
    QVERIFY2(change.rfind("micro-batch 1 ", 0) == 0, change.c_str());  // the nearest: the same job in more steps
    QCOMPARE(w->shown().plans[1].job.micro_batch, 1);
    QVERIFY(text.contains("    cluster: {gpu: rtx-4090, gpus: 1}\n    job: {micro_batch: 1}"));
    // The other plan as it was.
    QCOMPARE(w->shown().plans[0].job.micro_batch, 2);
  }

  // A click on a searched layout adds it to the text as a plan, shown beside the picks with the
  // figures the search had for it.
  void clicking_a_searched_point_adds_it_as_a_plan() {
    auto w = window();
    auto* editor = w->findChild<QPlainTextEdit*>("editor");
    editor->setPlainText(
        "# a small search\n"
        "schema_version: 1\n"
        "name: small search\n"
        "model: llama-3.1-8b\n"
        "job:\n"
        "  method: lora\n"
        "  seq_len: 2048\n"
        "  global_batch: 16\n"
        "  tokens: 20M\n"
        "  precision: bf16-mixed\n"
        "  framework: hf-trainer\n"
        "search:\n"
        "  gpus: [h100-sxm-80gb, rtx-4090]\n"
        "  gpu_counts: [1, 2]\n"
        "  micro_batch: [1, 2]\n"
        "constraints:\n"
        "  deadline: 2 h\n");  // the front's 1x RTX 4090 layouts (3.1 h and more) miss it
    w->evaluate_now();
    QVERIFY(w->shown().search != nullptr);
    const auto searched = w->shown().search;
    QVERIFY(w->shown().scenario->plans.empty());
    const std::size_t picks = w->shown().plans.size();
    auto* view = w->findChild<QChartView*>("search_chart");
    QScatterSeries* points = nullptr;
    for (QAbstractSeries* s : view->chart()->series())
      if (auto* sc = qobject_cast<QScatterSeries*>(s); sc && sc->name() == "Pareto front" && sc->count() > 0)
        points = sc;
    QVERIFY(points);
    // The front drawn as the front holds only layouts that meet the deadline; the front's others
    // are drawn apart ("Pareto front, misses the constraints"), not as candidates.
    int missed = 0;
    for (QAbstractSeries* s : view->chart()->series())
      if (auto* sc = qobject_cast<QScatterSeries*>(s); sc && sc->name().startsWith("Pareto front"))
        for (const QPointF& at : sc->points())
          for (const auto& c : searched->candidates)
            if (c.evaluation.feasible() && c.evaluation.cost.job_time_s / 3600 == at.x() &&
                c.evaluation.cost.cost_usd == at.y()) {
              QCOMPARE(c.meets_constraints, sc->name() == "Pareto front");
              missed += !c.meets_constraints;
            }
    QVERIFY2(missed > 0, "no front point misses the deadline: the check above checks nothing");
    const QPointF p = points->at(0);
    emit points->clicked(p);
    const QString text = editor->toPlainText();
    QVERIFY(text.startsWith("# a small search\nschema_version: 1\n"));
    QVERIFY(text.contains("\nplans:\n  - name: "));
    w->evaluate_now();
    QCOMPARE(w->shown().search, searched);  // only the plans changed: the search is not run again
    QCOMPARE(w->shown().scenario->plans.size(), std::size_t{1});
    QCOMPARE(w->shown().plans.size(), picks + 1);
    const auto& added = w->shown().evaluations.back();
    // The point's figures: job time in hours, dollars.
    QCOMPARE(added.cost.job_time_s / 3600, p.x());
    QCOMPARE(added.cost.cost_usd, p.y());
    QCOMPARE(w->shown().text_plan.back(), 0);
    QVERIFY(w->grab().save(QString::fromStdString(fs::path(FTPLAN_SCREENSHOT_DIR) / "search-point-added.png")));
  }

  // Closing the window during a search returns within 0.2 s: the search stops between layouts.
  void closing_during_a_search_is_quick() {
    auto w = window();
    QSignalSpy done(w.get(), &MainWindow::evaluated);
    QVERIFY(w->open_file(fs::path(FTPLAN_SCENARIOS_DIR) / "llama70b-plan.yaml"));
    QVERIFY(QMetaObject::invokeMethod(w.get(), "start_evaluation"));
    QTest::qWait(300);
    QVERIFY2(done.isEmpty(), "the search ended before the window was closed: nothing was cancelled");
    QElapsedTimer clock;
    clock.start();
    w.reset();
    const qint64 ms = clock.elapsed();
    qInfo("closed in %lld ms", static_cast<long long>(ms));
    QVERIFY(ms < 200);
  }
};

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
