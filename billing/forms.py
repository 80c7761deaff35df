from django import forms

from .models import Plan


class PlanChoiceForm(forms.Form):
    """The plan a customer asks to move to, by name, among the listed plans."""

    plan = forms.ModelChoiceField(queryset=Plan.objects.filter(is_public=True), to_field_name="name",
                                  error_messages={"required": "Choose a plan.",
                                                  "invalid_choice": "Choose one of the listed plans."})
