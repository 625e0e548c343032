#include "timeline_panel.hpp"

#include <utility>

#include <QApplication>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>

#include <fmt/format.h>

#include "common/units.hpp"
#include "evaluate/evaluate.hpp"
#include "mutants.hpp"
#include "timeline_view.hpp"

namespace ftplan::gui {

TimelinePanel::TimelinePanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  plan_ = new QComboBox;
  plan_->setObjectName("timeline_plan");
  stage_ = new QComboBox;
  stage_->setObjectName("timeline_stage");
  stage_->setToolTip("Whose rank the rows show: the slowest pipeline stage's, or a chosen stage's.");
  view_ = new TimelineView;
  view_->setObjectName("timeline");
  view_->setToolTip("Wheel: zoom; drag: pan; right click: the whole step.");
  auto* pick = new QHBoxLayout;
  pick->addWidget(new QLabel("Step of"));
  pick->addWidget(plan_, 1);
  pick->addWidget(stage_);
  layout->addLayout(pick);
  layout->addWidget(view_, 1);
  connect(plan_, &QComboBox::currentIndexChanged, this, &TimelinePanel::show_plan);
  connect(stage_, &QComboBox::currentIndexChanged, this, [this](int) { show_plan(plan_->currentIndex()); });
  connect(&watcher_, &QFutureWatcher<TracedStep>::finished, this, &TimelinePanel::done);
}

TimelinePanel::~TimelinePanel() { watcher_.waitForFinished(); }

void TimelinePanel::set_plans(const model::ModelSpec& model, std::vector<Shown> plans) {
  model_ = model;
  plans_ = std::move(plans);
  const int keep = plan_->currentIndex();
  const QSignalBlocker quiet(plan_);
  plan_->clear();
  for (const auto& p : plans_) plan_->addItem(QString::fromStdString(p.plan.name));
  plan_->setCurrentIndex(keep >= 0 && keep < plan_->count() ? keep : 0);
  stale_ = true;
}

void TimelinePanel::show_if_stale() {
  if (stale_) show_plan(plan_->currentIndex());
}

void TimelinePanel::show_plan(int index) {
  stale_ = false;
  ++generation_;  // a traced step under way is of an older choice now
  if (index < 0 || index >= static_cast<int>(plans_.size())) {
    view_->set_timeline({}, QString());
    return;
  }
  const Shown& shown = plans_[static_cast<std::size_t>(index)];
  const int stages = shown.plan.parallel.pp;
  if (stage_->count() != stages + 1) {
    // The stages of this plan; the slowest stage's rank unless another is chosen.
    const QSignalBlocker quiet(stage_);
    stage_->clear();
    stage_->addItem("slowest stage's rank", -1);
    for (int s = 0; s < stages; ++s) stage_->addItem(QString("stage %1 of %2").arg(s).arg(stages), s);
  }
  stage_->setVisible(stages > 1);
  const int trace_stage = mutant("timeline_stage_choice_ignored") ? -1 : stage_->currentData().toInt();
  if (!shown.not_traced.empty()) {
    view_->set_timeline({}, QString::fromStdString(shown.plan.name + ": " + shown.not_traced));
    return;
  }
  // Simulated again with a trace (every micro-batch, no steady-state shortcut), on a worker
  // thread: its streams, links and memory per tier, as `ftplan simulate --trace` writes them.
  // (Under the steady-state shortcut a trace holds only the simulated micro-batches; the whole
  // step is shown, within the shortcut's 0.5% of the evaluation's. 0.01-0.9 s of CPU for the
  // example scenarios' plans.)
  if (watcher_.isRunning()) {
    pending_ = index;  // shown when the one under way is done
    return;
  }
  view_->set_timeline({}, QString::fromStdString(shown.plan.name + ": simulating the step with a trace…"));
  awaited_ = true;
  watcher_.setFuture(QtConcurrent::run([model = model_, plan = shown.plan, generation = generation_, trace_stage] {
    sim::Options traced;
    traced.trace = true;
    traced.trace_stage = trace_stage;
    TracedStep out;
    out.plan = plan.name;
    out.stages = plan.parallel.pp;
    out.generation = generation;
    out.step = evaluate::evaluate_plan(model, plan, traced).step;  // the pipeline every view reads
    return out;
  }));
}

void TimelinePanel::done() {
  awaited_ = false;
  TracedStep r = watcher_.result();
  if (pending_ >= 0) {
    show_plan(std::exchange(pending_, -1));  // a newer choice (or evaluation) came while this one ran
    return;
  }
  if (r.generation != generation_) return;  // what is shown now is newer
  // Whose rank: the slowest stage's, or a chosen stage's beside which one is slowest.
  const std::string rank =
      r.stages == 1 ? std::string("one rank")
      : r.step.tracks.stage == r.step.stage
          ? fmt::format("stage {}'s rank, the slowest", r.step.stage)
          : fmt::format("stage {}'s rank; the slowest is stage {}", r.step.tracks.stage, r.step.stage);
  view_->set_timeline(
      r.step.timeline,
      QString::fromStdString(fmt::format("{}: one step, {} ({}; critical path: black band; wheel: zoom, drag: pan)",
                                         r.plan, ftplan::format_duration(r.step.step_time_s), rank)),
      std::move(r.step.tracks));
  emit shown();
}

void TimelinePanel::wait() {
  // Until done() has run for the last step started: a step that has finished but whose finished()
  // is not delivered yet counts too (isRunning() is false by then).
  while (awaited_ || pending_ >= 0) {
    watcher_.waitForFinished();
    QApplication::processEvents();  // delivers finished(): done
  }
}

}  // namespace ftplan::gui
