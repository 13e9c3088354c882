# The Judges page's scoring estimate becomes one estimate job with a kind (scoring, retrieval, fine-tuning): each
# model-loading estimate is made by a worker, none in a web request.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('labeling', '0032_scoring_estimate'),
    ]

    operations = [
        migrations.RemoveConstraint(model_name='scoringestimate', name='scoringestimate_status_valid'),
        migrations.RenameModel(old_name='ScoringEstimate', new_name='Estimate'),
        migrations.AddConstraint(
            model_name='estimate',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'running', 'done', 'failed', 'cancelled'])), name='estimate_status_valid'),
        ),
        migrations.AddField(
            model_name='estimate',
            name='kind',
            field=models.CharField(choices=[('scoring', 'scoring'), ('retrieval', 'retrieval'), ('finetune', 'fine-tuning')], default='scoring', max_length=16),
        ),
        migrations.AddField(
            model_name='estimate',
            name='arguments',
            field=models.JSONField(blank=True, default=dict, help_text="what the estimated job would be started with (the page's form)"),
        ),
        migrations.AlterField(
            model_name='estimate',
            name='judge',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='estimates', to='labeling.judge'),
        ),
        migrations.AlterField(
            model_name='estimate',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='estimates', to='labeling.project'),
        ),
        migrations.AlterField(
            model_name='estimate',
            name='scope',
            field=models.CharField(blank=True, choices=[('all', 'all pairs'), ('missing', 'pairs not yet judged under the current definition'), ('selection', 'selected pairs')], max_length=16),
        ),
        migrations.AlterField(
            model_name='estimate',
            name='result',
            field=models.JSONField(blank=True, help_text='the estimate (labeling.services.estimates)', null=True),
        ),
    ]
