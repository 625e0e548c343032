// One simulated step of one plan as a Gantt chart. With the step's tracks (sim::StepTracks, the
// data `simulate --trace` writes): a row per stream and per link of the slowest stage's rank, a
// bar per op or flow coloured by its category, and under them the rank's memory over the step per
// tier (GPU, host DRAM, NVMe) against each pool's capacity. Without: a row per component (GPU, CPU,
// NVMe, NIC), a bar per busy interval coloured by what it runs (sim::Timeline, what the power
// model reads). Wheel zooms around the pointer (the memory plots with the bars), drag pans, right
// click shows the whole step, hover names a bar or reads the memory at that time, shift-drag
// measures a span of time (as a profiler's ruler) until the next click. The bars on the step's
// critical path (what its end waited for, sim::TrackSpan::critical) carry a black band along their top; hover over
// a row's name gives its busy share and its share of the critical path.
#pragma once

#include <QString>
#include <QStringList>

class QPainter;
#include <QWidget>

#include "sim/simulate.hpp"
#include "sim/timeline.hpp"

namespace ftplan::gui {

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineView(QWidget* parent = nullptr);
  // The step's tracks replace the component rows (empty tracks: the components again).
  void set_timeline(const sim::Timeline& timeline, const QString& title, sim::StepTracks tracks = {});
  const sim::Timeline& timeline() const { return timeline_; }
  const sim::StepTracks& tracks() const { return tracks_; }
  // The rows shown, top down ("GPU", ... or the streams' then the links' names).
  QStringList row_names() const;
  const QString& title() const { return title_; }
  // Seconds shown across the plot now (the whole step until zoomed).
  double visible_s() const;
  void zoom(double factor, double at_s);              // factor > 1 zooms in, keeping at_s where it is
  double time_at(double x) const { return s_of(x); }  // the step's time at widget x

  // What the pointer at `at` is over, in words (an op, a flow, the tiers' memory at that time);
  // "" over nothing. The tooltip shows it, and the widget's help elsewhere.
  QString tip_at(QPointF at) const;

  // What the last paint drew, in brief (for the window's tests, which read what a user sees): the
  // legend's categories, how many bars carry their op's name, and how many memory tiers got their
  // curve and their capacity line.
  struct Drawn {
    QStringList legend;
    int named_bars = 0;
    int critical_bars = 0;  // bars banded as on the critical path
    int memory_curves = 0;
    int capacity_lines = 0;
    QString span;  // the measured span's label ("" when none)
  };
  const Drawn& drawn() const { return drawn_; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;
  void resizeEvent(QResizeEvent*) override;

 private:
  QRectF plot() const;         // where bars are drawn
  QRectF memory_plot() const;  // under it, the memory per tier (empty without tracks)
  bool has_tracks() const { return !tracks_.streams.empty() || !tracks_.links.empty(); }
  int row_count() const;
  double x_of(double s) const;  // seconds -> pixels
  double s_of(double x) const;  // pixels -> seconds
  void fit();                   // the whole step across the plot
  void paint_tracks(QPainter& painter);
  void paint_components(QPainter& painter);

  sim::Timeline timeline_;
  sim::StepTracks tracks_;
  QString title_;
  double start_s_ = 0;   // left edge of the plot
  double px_per_s_ = 0;  // zoom
  double drag_x_ = -1;   // where a drag started (-1: none)
  // A measured span (shift-drag), in seconds of the step; none while span_from_s_ < 0.
  double span_from_s_ = -1, span_to_s_ = -1;
  bool measuring_ = false;
  void paint_span(QPainter& painter);
  int left_ = 60;  // the row names' width
  Drawn drawn_;
};

}  // namespace ftplan::gui
