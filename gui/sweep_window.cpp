#include "sweep_window.hpp"
#include "mutants.hpp"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>

namespace ftplan::gui {

// The grid as coloured cells, each with its value: numbers on a blue scale (logarithmic when
// they span more than a decade and are positive), text (which plan is cheapest) by category.
class Heatmap : public QWidget {
 public:
  Heatmap() {
    setMinimumSize(500, 300);
    setBackgroundRole(QPalette::Base);
    setAutoFillBackground(true);
  }
  void set(const SweepGrid& grid, const QString& x_name, const QString& y_name) {
    grid_ = grid;
    x_name_ = x_name;
    y_name_ = y_name;
    update();
  }
  const SweepGrid& grid() const { return grid_; }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    const std::size_t nx = grid_.x.size(), ny = grid_.y.size();
    if (nx == 0 || ny == 0) {
      p.drawText(rect(), Qt::AlignCenter, "Open a sweep (File > Open sweep…) and let it run.");
      return;
    }
    const QRectF area(130, 10, width() - 140, height() - 60);
    const double w = area.width() / static_cast<double>(nx), h = area.height() / static_cast<double>(ny);
    double lo = 0, hi = 0;
    bool numeric = false, positive = true;
    std::vector<std::string> categories;
    for (std::size_t i = 0; i < grid_.number.size(); ++i) {
      const double v = grid_.number[i];
      if (std::isnan(v)) {
        if (!grid_.text[i].empty() &&
            std::find(categories.begin(), categories.end(), grid_.text[i]) == categories.end())
          categories.push_back(grid_.text[i]);
        continue;
      }
      lo = numeric ? std::min(lo, v) : v;
      hi = numeric ? std::max(hi, v) : v;
      numeric = true;
      positive = positive && v > 0;
    }
    const bool log = numeric && positive && hi > 10 * lo;
    const QColor palette[] = {QColor(31, 119, 180),  QColor(255, 127, 14),  QColor(44, 160, 44),
                              QColor(214, 39, 40),   QColor(148, 103, 189), QColor(140, 86, 75),
                              QColor(227, 119, 194), QColor(127, 127, 127)};
    for (std::size_t yi = 0; yi < ny; ++yi)
      for (std::size_t xi = 0; xi < nx; ++xi) {
        // y grows upward, as on a chart.
        const QRectF cell(area.left() + static_cast<double>(xi) * w, area.bottom() - static_cast<double>(yi + 1) * h, w,
                          h);
        const double v = grid_.number_at(xi, yi);
        const std::string& text = grid_.text_at(xi, yi);
        QColor fill(235, 235, 235);
        if (!std::isnan(v) && hi > lo) {
          const double t = log ? std::log(v / lo) / std::log(hi / lo) : (v - lo) / (hi - lo);
          fill = QColor::fromRgbF(static_cast<float>(0.93 - 0.75 * t), static_cast<float>(0.95 - 0.55 * t),
                                  static_cast<float>(1.0 - 0.3 * t));
        } else if (!std::isnan(v)) {
          fill = QColor(120, 160, 220);
        } else if (!text.empty()) {
          const auto at = std::find(categories.begin(), categories.end(), text) - categories.begin();
          fill = palette[static_cast<std::size_t>(at) % std::size(palette)].lighter(140);
        }
        p.fillRect(cell.adjusted(1, 1, -1, -1), fill);
        p.drawText(cell, Qt::AlignCenter | Qt::TextWordWrap, QString::fromStdString(text));
      }
    for (std::size_t xi = 0; xi < nx; ++xi)
      p.drawText(QRectF(area.left() + static_cast<double>(xi) * w, area.bottom() + 2, w, 18), Qt::AlignHCenter,
                 QString::fromStdString(grid_.x[xi]));
    for (std::size_t yi = 0; yi < ny; ++yi)
      p.drawText(QRectF(0, area.bottom() - static_cast<double>(yi + 1) * h, area.left() - 6, h),
                 Qt::AlignRight | Qt::AlignVCenter, QString::fromStdString(grid_.y[yi]));
    p.drawText(QRectF(area.left(), area.bottom() + 22, area.width(), 18), Qt::AlignHCenter, x_name_);
    p.save();
    p.translate(10, area.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-area.height() / 2, -10, area.height(), 18), Qt::AlignHCenter, y_name_);
    p.restore();
  }

 private:
  SweepGrid grid_;
  QString x_name_, y_name_;
};

SweepWindow::SweepWindow(const model::Zoo& zoo, const hardware::Catalog& catalog, QWidget* parent)
    : QWidget(parent, Qt::Window), zoo_(zoo), catalog_(catalog) {
  setWindowTitle("ftplan — sweep");
  resize(1100, 700);
  title_ = new QLabel;
  title_->setWordWrap(true);
  progress_ = new QProgressBar;
  cancel_ = new QPushButton("Cancel");
  cancel_->setEnabled(false);
  x_ = new QComboBox;
  x_->setObjectName("sweep_x");
  y_ = new QComboBox;
  y_->setObjectName("sweep_y");
  field_ = new QComboBox;
  field_->setObjectName("sweep_field");
  plan_ = new QComboBox;
  plan_->setObjectName("sweep_plan");
  heatmap_ = new Heatmap;
  auto* top = new QHBoxLayout;
  top->addWidget(progress_, 1);
  top->addWidget(cancel_);
  auto* pick = new QHBoxLayout;
  for (auto [label, box] :
       {std::pair{"across", x_}, std::pair{"up", y_}, std::pair{"show", field_}, std::pair{"of plan", plan_}}) {
    pick->addWidget(new QLabel(label));
    pick->addWidget(box, 1);
  }
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title_);
  layout->addLayout(top);
  layout->addLayout(pick);
  layout->addWidget(heatmap_, 1);
  // The axes off the map are held at one value each: their first, or the one picked here.
  hold_row_ = new QWidget;
  new QHBoxLayout(hold_row_);
  hold_row_->layout()->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(hold_row_);
  connect(cancel_, &QPushButton::clicked, this, &SweepWindow::cancel);
  connect(&watcher_, &QFutureWatcher<void>::finished, this, &SweepWindow::done);
  for (QComboBox* box : {x_, y_, field_, plan_})
    connect(box, &QComboBox::currentIndexChanged, this, &SweepWindow::redraw);
}

SweepWindow::~SweepWindow() {
  cancel();
  watcher_.waitForFinished();
}

std::size_t SweepWindow::rows() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return rows_.size();
}

std::vector<io::Row> SweepWindow::results() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return rows_;
}

bool SweepWindow::open(const std::filesystem::path& file) {
  if (running()) return false;
  // The last sweep's map goes now, whether this one loads or not: under a new title (or an error)
  // it would read as this sweep's.
  grid_ = {};
  hold_.clear();
  if (!mutant("heatmap_not_cleared")) heatmap_->set(grid_, {}, {});
  clear_hold_pickers();
  try {
    sweep_.emplace(sweep::Sweep::load(file, zoo_, catalog_));
  } catch (const std::exception& e) {
    title_->setText(QString::fromStdString(e.what()));
    return false;
  }
  axes_.clear();
  for (const auto& a : sweep_->axes()) axes_.push_back(a.column);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    rows_.clear();
  }
  points_done_ = 0;
  title_->setText(QString("%1: %2 points over %3 axes, running…")
                      .arg(QString::fromStdString(sweep_->name()))
                      .arg(sweep_->size())
                      .arg(axes_.size()));
  progress_->setRange(0, static_cast<int>(sweep_->size()));
  progress_->setValue(0);
  cancel_->setEnabled(true);
  stop_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::int64_t> points(static_cast<std::size_t>(sweep_->size()));
  for (std::size_t i = 0; i < points.size(); ++i) points[i] = static_cast<std::int64_t>(i);
  watcher_.setFuture(QtConcurrent::run([this, points = std::move(points), stop = stop_, s = *sweep_] {
    try {
      sweep::run(s, points, 0, [&](std::int64_t, std::vector<io::Row>& rows) {
        // Stopping: sweep::run ends its workers after their current point when `done` throws.
        if (stop->load()) throw std::runtime_error("cancelled");
        const std::lock_guard<std::mutex> lock(mutex_);
        for (auto& r : rows) rows_.push_back(std::move(r));
        // The bar moves with each percent of the points (posted to the window's thread; a
        // window closed meanwhile drops it), not with a timer that a short sweep never sees.
        const std::int64_t done = ++points_done_, total = static_cast<std::int64_t>(points.size());
        if (done * 100 / total != (done - 1) * 100 / total && !mutant("sweep_progress_frozen"))
          QMetaObject::invokeMethod(
              this, [this, done] { progress_->setValue(static_cast<int>(done)); }, Qt::QueuedConnection);
      });
    } catch (const std::exception&) {
      // cancelled (or a point threw): the rows so far stay
    }
  }));
  return true;
}

void SweepWindow::cancel() {
  if (stop_) stop_->store(true);
}

void SweepWindow::done() {
  cancel_->setEnabled(false);
  progress_->setValue(static_cast<int>(points_done_.load()));
  std::vector<io::Row> rows;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    rows = rows_;
  }
  const bool all = sweep_ && points_done_.load() == sweep_->size();
  title_->setText(QString("%1: %2 of %3 points%4")
                      .arg(QString::fromStdString(sweep_ ? sweep_->name() : std::string()))
                      .arg(points_done_.load())
                      .arg(sweep_ ? sweep_->size() : 0)
                      .arg(all ? "" : " (cancelled: the heatmap shows those)"));
  {
    const QSignalBlocker a(x_), b(y_), c(field_), d(plan_);
    x_->clear();
    y_->clear();
    field_->clear();
    plan_->clear();
    for (const auto& a : axes_) {
      x_->addItem(QString::fromStdString(a));
      y_->addItem(QString::fromStdString(a));
    }
    // Across: the last axis; up: the one before it (e.g. deadline across, model size up).
    x_->setCurrentIndex(static_cast<int>(axes_.size()) - 1);
    y_->setCurrentIndex(std::max(0, static_cast<int>(axes_.size()) - 2));
    for (const auto& f : grid_fields(rows)) field_->addItem(QString::fromStdString(f));
    const int cheapest = field_->findText("cheapest_plan");
    field_->setCurrentIndex(cheapest >= 0 ? cheapest : 0);
    plan_->addItem("(each point's first)");
    std::vector<std::string> plans;
    for (const auto& r : rows)
      if (const io::Value* p = r.get("plan"); p && std::holds_alternative<std::string>(*p))
        if (std::find(plans.begin(), plans.end(), std::get<std::string>(*p)) == plans.end())
          plans.push_back(std::get<std::string>(*p));
    for (const auto& p : plans) plan_->addItem(QString::fromStdString(p));
  }
  redraw();
  emit finished();
}

void SweepWindow::redraw() {
  if (x_->count() == 0 || field_->count() == 0) return;
  show_grid(x_->currentText().toStdString(), y_->currentText().toStdString(), field_->currentText().toStdString(),
            plan_->currentIndex() <= 0 ? std::string() : plan_->currentText().toStdString());
}

void SweepWindow::show_grid(const std::string& x, const std::string& y, const std::string& field,
                            const std::string& plan) {
  std::vector<io::Row> rows;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    rows = rows_;
  }
  {
    // The pickers say what is shown.
    const QSignalBlocker a(x_), b(y_), c(field_), d(plan_);
    x_->setCurrentText(QString::fromStdString(x));
    y_->setCurrentText(QString::fromStdString(y));
    field_->setCurrentText(QString::fromStdString(field));
    plan_->setCurrentIndex(plan.empty() ? 0 : std::max(0, plan_->findText(QString::fromStdString(plan))));
  }
  grid_ = sweep_grid(rows, axes_, x, y, field, plan, hold_);
  heatmap_->set(grid_, QString::fromStdString(x), QString::fromStdString(y));
  heatmap_->setToolTip(QString::fromStdString(field + (plan.empty() ? "" : " of " + plan)));
  // The axes not on the map are held at their first value: say at which, so a reader knows
  // which slice of the sweep the cells are.
  // A picker per held axis, at the value it is held at (rebuilt: the held axes change with x and y).
  clear_hold_pickers();
  if (!grid_.held.empty()) hold_row_->layout()->addWidget(new QLabel("held fixed:"));
  for (std::size_t i = 0; i < grid_.held.size() && !mutant("held_axes_not_shown"); ++i) {
    const std::string axis = grid_.held[i].first;
    auto* box = new QComboBox;
    box->setObjectName(QString::fromStdString("hold:" + axis));
    for (const auto& v : grid_.held_values[i]) box->addItem(QString::fromStdString(v));
    box->setCurrentText(QString::fromStdString(grid_.held[i].second));
    hold_row_->layout()->addWidget(new QLabel(QString::fromStdString(axis + " =")));
    hold_row_->layout()->addWidget(box);
    connect(box, &QComboBox::currentTextChanged, this, [this, axis](const QString& v) {
      QTimer::singleShot(0, this, [this, axis, v] { hold(axis, v.toStdString()); });
    });
  }
  static_cast<QHBoxLayout*>(hold_row_->layout())->addStretch(1);
}

const SweepGrid& SweepWindow::drawn_grid() const { return heatmap_->grid(); }

void SweepWindow::clear_hold_pickers() {
  while (QLayoutItem* item = hold_row_->layout()->takeAt(0)) {
    delete item->widget();
    delete item;
  }
}

void SweepWindow::hold(const std::string& axis, const std::string& value) {
  hold_[axis] = value;
  redraw();
}

}  // namespace ftplan::gui
