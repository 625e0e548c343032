// The window's per-plan controls: one plan of the text (chosen by name) and its GPU, node, GPU
// count, layout (tp, pp, dp, cp, ZeRO), offload preset, DRAM, and the devices per node that back a
// tier (plan::kDeviceKinds: drives, CXL expanders).
// Each change is that plan's keys (keys_changed; docs/scenario-format.md), which the window writes
// into the text (io::set_plan_keys) and evaluates again; the form then shows what the text says.
#pragma once

#include <vector>

#include <QGroupBox>

#include "hardware/hardware.hpp"
#include "io/scenario_edit.hpp"
#include "plan/plan.hpp"

class QComboBox;
class QSpinBox;

namespace ftplan::gui {

class PlanForm : public QGroupBox {
  Q_OBJECT

 public:
  explicit PlanForm(const hardware::Catalog& catalog, QWidget* parent = nullptr);

  // The plans to choose from (the shown scenario's; nullptr: none read clean), keeping the choice
  // where it still names a plan; then the chosen plan's values. `plans` outlives the next call.
  void set_plans(const std::vector<plan::Plan>* plans);
  // The chosen plan's index in the text's `plans` (-1: none).
  int current() const;
  // The controls from the chosen plan, without writing (after a change the text refused, too).
  void fill();

 signals:
  // `note`: what the change did besides its keys, for the person ("" or the settings an offload
  // preset left out).
  void keys_changed(int plan, const std::vector<io::PlanKey>& keys, const QString& note);

 private:
  void changed(QObject* control);

  const std::vector<plan::Plan>* plans_ = nullptr;
  QComboBox* plan_pick_ = nullptr;
  QComboBox* gpu_ = nullptr;
  QComboBox* node_ = nullptr;
  QSpinBox* gpus_ = nullptr;
  QSpinBox* tp_ = nullptr;
  QSpinBox* pp_ = nullptr;
  QSpinBox* dp_ = nullptr;
  QSpinBox* cp_ = nullptr;
  QSpinBox* zero_ = nullptr;
  QComboBox* offload_ = nullptr;
  QSpinBox* dram_ = nullptr;
  // A row per kind of device that backs a tier: its catalog name (or none) and count per node
  // (cluster.KEY: [{ITEM: name, count: n}]); the controls are named ITEM and ITEM_count.
  struct DeviceRow {
    const char* key;
    const char* item;
    QComboBox* pick;
    QSpinBox* count;
  };
  std::vector<DeviceRow> device_rows_;
};

}  // namespace ftplan::gui
