// The "Step timeline" tab: which plan and, where it has pipeline stages, whose rank; one traced
// step of it simulated on a worker thread (every micro-batch, as `ftplan simulate --trace`), shown
// in a TimelineView. Only when looked at: set_plans marks what is shown stale, show_if_stale
// simulates (the window calls it when the tab is current).
#pragma once

#include <string>
#include <vector>

#include <QFutureWatcher>
#include <QWidget>

#include "model/model.hpp"
#include "plan/plan.hpp"
#include "sim/simulate.hpp"

class QComboBox;

namespace ftplan::gui {

class TimelineView;

class TimelinePanel : public QWidget {
  Q_OBJECT

 public:
  // A plan to choose, and why it has no step to trace ("" when it has one: it fits).
  struct Shown {
    plan::Plan plan;
    std::string not_traced;
  };
  explicit TimelinePanel(QWidget* parent = nullptr);
  ~TimelinePanel() override;  // waits for a traced step under way (it reads no member)

  // The plans to choose from (an evaluation's), the chosen one kept by its place; what is shown is
  // stale until show_if_stale.
  void set_plans(const model::ModelSpec& model, std::vector<Shown> plans);
  // Simulates the chosen plan's traced step, unless what is shown is of the plans set last.
  void show_if_stale();
  // Until the last traced step started is on screen.
  void wait();
  TimelineView* view() const { return view_; }

 signals:
  // A newly simulated step is on screen.
  void shown();

 private:
  void show_plan(int index);
  void done();

  QComboBox* plan_ = nullptr;
  // Whose rank the rows show where the plan has pipeline stages: the slowest stage's (data -1) or
  // a chosen one's (its index); hidden for a plan of one stage.
  QComboBox* stage_ = nullptr;
  TimelineView* view_ = nullptr;
  model::ModelSpec model_;
  std::vector<Shown> plans_;
  struct TracedStep {
    std::string plan;
    sim::StepResult step;
    int stages = 1;  // the plan's pipeline stages
    int generation = 0;
  };
  QFutureWatcher<TracedStep> watcher_;
  int pending_ = -1;      // a plan chosen while a traced step was simulated
  bool awaited_ = false;  // a traced step was started and done() has not run for it
  int generation_ = 0;    // which show_plan call the traced step under way answers
  bool stale_ = true;     // what is shown is not of the plans set last
};

}  // namespace ftplan::gui
