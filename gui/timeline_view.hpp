// One simulated step of one plan as a Gantt chart: a row per component of the slowest stage's
// rank (GPU, CPU, NVMe, NIC), a bar per busy interval coloured by what it runs (sim::Timeline,
// the data the power model reads and `--trace` writes). Wheel zooms around the pointer, drag pans,
// hover names an interval.
#pragma once

#include <QString>
#include <QWidget>

#include "sim/timeline.hpp"

namespace ftplan::gui {

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineView(QWidget* parent = nullptr);
  void set_timeline(const sim::Timeline& timeline, const QString& title);
  const sim::Timeline& timeline() const { return timeline_; }
  const QString& title() const { return title_; }
  // Seconds shown across the plot now (the whole step until zoomed).
  double visible_s() const;
  void zoom(double factor, double at_s);  // factor > 1 zooms in, keeping at_s where it is

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void resizeEvent(QResizeEvent*) override;

 private:
  QRectF plot() const;          // where bars are drawn
  double x_of(double s) const;  // seconds -> pixels
  double s_of(double x) const;  // pixels -> seconds
  void fit();                   // the whole step across the plot

  sim::Timeline timeline_;
  QString title_;
  double start_s_ = 0;   // left edge of the plot
  double px_per_s_ = 0;  // zoom
  double drag_x_ = -1;   // where a drag started (-1: none)
};

}  // namespace ftplan::gui
