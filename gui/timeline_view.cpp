#include "timeline_view.hpp"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include "io/units.hpp"

namespace ftplan::gui {

namespace {

constexpr int kRows = 4;  // sim::Interval::Component: gpu, cpu, nvme, nic
const char* const kRowNames[kRows] = {"GPU", "CPU", "NVMe", "NIC"};
constexpr int kActivities = 9;  // sim::Activity
const char* const kActivityNames[kActivities] = {"GEMM",        "attention", "memory-bound", "communication", "copy",
                                                 "CPU compute", "NVMe read", "NVMe write",   "idle"};
const QColor kColors[kActivities] = {QColor(31, 119, 180), QColor(44, 160, 44),  QColor(148, 103, 189),
                                     QColor(214, 39, 40),  QColor(255, 127, 14), QColor(140, 86, 75),
                                     QColor(23, 190, 207), QColor(188, 189, 34), QColor(200, 200, 200)};
constexpr int kLeft = 60, kTop = 46, kBottom = 34, kRight = 12;

QString seconds(double s) { return QString::fromStdString(io::format_duration(s)); }

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(220);
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
}

void TimelineView::set_timeline(const sim::Timeline& timeline, const QString& title) {
  timeline_ = timeline;
  title_ = title;
  fit();
  update();
}

QRectF TimelineView::plot() const {
  return QRectF(kLeft, kTop, std::max(10, width() - kLeft - kRight), std::max(10, height() - kTop - kBottom));
}

double TimelineView::x_of(double s) const { return plot().left() + (s - start_s_) * px_per_s_; }
double TimelineView::s_of(double x) const { return start_s_ + (x - plot().left()) / px_per_s_; }
double TimelineView::visible_s() const { return px_per_s_ > 0 ? plot().width() / px_per_s_ : 0; }

void TimelineView::fit() {
  start_s_ = 0;
  px_per_s_ = timeline_.step_s > 0 ? plot().width() / timeline_.step_s : 1;
}

void TimelineView::resizeEvent(QResizeEvent*) {
  if (start_s_ == 0) fit();
}

void TimelineView::zoom(double factor, double at_s) {
  if (timeline_.step_s <= 0) return;
  const double x = x_of(at_s);
  // No further out than the whole step, no further in than a microsecond across the plot.
  px_per_s_ = std::clamp(px_per_s_ * factor, plot().width() / timeline_.step_s, plot().width() / 1e-6);
  start_s_ = std::clamp(at_s - (x - plot().left()) / px_per_s_, 0.0, std::max(0.0, timeline_.step_s - visible_s()));
  update();
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  zoom(std::pow(1.25, event->angleDelta().y() / 120.0), s_of(event->position().x()));
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  drag_x_ = event->position().x();
  if (event->button() == Qt::RightButton) {  // right click: the whole step again
    fit();
    update();
  }
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  const QPointF p = event->position();
  if (event->buttons() & Qt::LeftButton && drag_x_ >= 0) {
    start_s_ = std::clamp(start_s_ - (p.x() - drag_x_) / px_per_s_, 0.0, std::max(0.0, timeline_.step_s - visible_s()));
    drag_x_ = p.x();
    update();
    return;
  }
  const QRectF r = plot();
  const int row = static_cast<int>((p.y() - r.top()) / (r.height() / kRows));
  if (!r.contains(p) || row < 0 || row >= kRows) return;
  const double s = s_of(p.x());
  for (const auto& i : timeline_.intervals)
    if (static_cast<int>(i.component) == row && i.start_s <= s && s <= i.end_s) {
      QToolTip::showText(event->globalPosition().toPoint(),
                         QString("%1 %2: %3 to %4 (%5)")
                             .arg(kRowNames[row], kActivityNames[static_cast<int>(i.activity)], seconds(i.start_s),
                                  seconds(i.end_s), seconds(i.end_s - i.start_s)),
                         this);
      return;
    }
  QToolTip::hideText();
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing, false);
  const QRectF r = plot();
  painter.drawText(QRectF(0, 2, width(), 18), Qt::AlignHCenter, title_);
  if (timeline_.step_s <= 0) {
    painter.drawText(r, Qt::AlignCenter, "No simulated step to show (the plan does not fit, or is a search's).");
    return;
  }
  // Legend: the activities this step has.
  bool used[kActivities] = {};
  for (const auto& i : timeline_.intervals) used[static_cast<int>(i.activity)] = true;
  double lx = kLeft;
  const QFontMetrics fm(font());
  for (int a = 0; a < kActivities; ++a) {
    if (!used[a]) continue;
    painter.fillRect(QRectF(lx, 24, 10, 10), kColors[a]);
    painter.drawText(QPointF(lx + 14, 33), kActivityNames[a]);
    lx += 24 + fm.horizontalAdvance(kActivityNames[a]);
  }
  const double row_h = r.height() / kRows;
  for (int row = 0; row < kRows; ++row) {
    painter.drawText(QRectF(0, r.top() + row * row_h, kLeft - 6, row_h), Qt::AlignRight | Qt::AlignVCenter,
                     kRowNames[row]);
    painter.setPen(QColor(225, 225, 225));
    painter.drawLine(QPointF(r.left(), r.top() + (row + 1) * row_h), QPointF(r.right(), r.top() + (row + 1) * row_h));
    painter.setPen(palette().color(QPalette::Text));
  }
  painter.save();
  painter.setClipRect(r);
  for (const auto& i : timeline_.intervals) {
    const double x0 = x_of(i.start_s), x1 = x_of(i.end_s);
    if (x1 < r.left() || x0 > r.right()) continue;
    const int row = static_cast<int>(i.component);
    // At least a pixel wide: a short kernel is still seen.
    painter.fillRect(QRectF(x0, r.top() + row * row_h + 3, std::max(1.0, x1 - x0), row_h - 6),
                     kColors[static_cast<int>(i.activity)]);
  }
  painter.restore();
  // Time axis: about eight ticks at round values.
  const double span = visible_s();
  const double raw = span / 8;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  painter.drawLine(QPointF(r.left(), r.bottom()), QPointF(r.right(), r.bottom()));
  for (double t = std::ceil(start_s_ / step) * step; t <= start_s_ + span + 1e-12; t += step) {
    const double x = x_of(t);
    painter.drawLine(QPointF(x, r.bottom()), QPointF(x, r.bottom() + 4));
    painter.drawText(QRectF(x - 50, r.bottom() + 5, 100, 16), Qt::AlignHCenter, seconds(t));
  }
  if (!timeline_.partials.empty())
    painter.drawText(QRectF(0, height() - 14, width(), 14), Qt::AlignHCenter,
                     QString("the simulated part of the step (steady-state shortcut); the whole step: %1")
                         .arg(seconds(timeline_.whole_step_s())));
}

}  // namespace ftplan::gui
