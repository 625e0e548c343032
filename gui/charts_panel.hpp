// The window's charts, a tab each: job time, dollars and GPU memory; host DRAM, CXL memory and NVMe
// per node; the planner's whole search. Each plan's bar is the figure judged for fit against its
// capacity and, with a pinned baseline, against the same plan's figure there. The window adds its
// step timeline as a further tab (main_window.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <QByteArray>
#include <QStringList>
#include <QTabWidget>

#include "evaluation.hpp"
#include "plan/plan.hpp"

class QChartView;

namespace ftplan::gui {

class ChartsPanel : public QTabWidget {
  Q_OBJECT

 public:
  explicit ChartsPanel(QWidget* parent = nullptr);

  // Draws `shown`'s plans, against `pinned`'s plans of the same name when given.
  void show_outcome(const Outcome& shown, const Outcome* pinned);
  // The charts with something drawn, each named for its file ("job-time", "cost", "gpu-memory",
  // "host-memory", "nvme", "cxl-memory" where shown, "search" after a search), as PNG or SVG (an
  // SVG needs a build with Qt Svg: FTPLAN_GUI_SVG).
  std::vector<std::pair<std::string, QByteArray>> render(bool svg);

 signals:
  // A point of the search chart was clicked: the search's candidate `candidate`.
  void candidate_clicked(int candidate);

 private:
  void show_charts(const Outcome& o, const Outcome* pinned);
  void show_search(const Outcome& o);

  QChartView* time_chart_ = nullptr;
  QChartView* cost_chart_ = nullptr;
  QChartView* memory_chart_ = nullptr;
  // A chart per node tier (plan::kTiers after the GPU's), named ROW_chart: one a plan may lack
  // (CXL memory) shown where some plan's node has it or places state there.
  std::vector<std::pair<plan::Tier, QChartView*>> tier_charts_;
  QChartView* search_chart_ = nullptr;
  bool search_shown_ = false;  // the outcome shown has a search
};

// Short labels for chart categories and the table's plan names: the plans' first words when those
// are short and distinct ("A", "B" of "A 32x H100 FSDP", ...), else "plan 1", "plan 2", ...
QStringList short_names(const std::vector<plan::Plan>& plans);

}  // namespace ftplan::gui
